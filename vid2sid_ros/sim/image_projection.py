"""The image-space camera model of a real clip: nuisance parameters kept apart from physics.

A phone filming a pendulum has no calibration target in view: nobody knows where the
pivot projects, how many pixels a metre covers, whether the phone is rolled, or that
it slowly tilts during the clip. :class:`ImageProjection` maps simulated 3-D points to
pixels with exactly those unknowns as *nuisance* parameters, identified together
with the physics but never written into the simulator (the role of MuJoCo sysid's
``signal_transform``: measurement effects stay outside the model).

Model (all lengths in metres in the world, pixels in the image)::

    d      = p - anchor                       point relative to the anchor (e.g. the pivot), m
    h, v   = d · right,  d · up               coordinates in the view plane, m
    z      = d · (up × right)                 depth, positive away from the camera, m
    s_z    = px_per_m · D / (D + z)           perspective scale (s_z = px_per_m when D = 0: orthographic)
    [du]   = s_z · R(roll) · [ h]             R(a) = [[cos a, -sin a], [sin a, cos a]]
    [dv]                     [-v]             (image y grows downwards)
    u, v   = origin + (du, dv)                origin = where the anchor projects, px
    then radial distortion about the image centre c:  q = c + (q - c)(1 + k1 r²),
         r = |q - c| / (image half-width)     (Brown–Conrady first term, OpenCV convention)
    then camera drift: q += drift · t         (slow pan/tilt of the camera during the clip)

Positive ``roll`` turns world-vertical lines clockwise in the image. ``drift`` models
the image sliding by a constant velocity (px/s) — a hand-held or settling phone; it is
measured independently by :func:`measure_background_shift` on the static background.

Pixel convention: pixel centres at integer coordinates, x = column, y = row (OpenCV).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Mapping, Sequence

import numpy as np

from .base import whole_px

__all__ = ["ImageProjection", "ProjectionError", "PROJECTION_FIELDS", "measure_background_shift"]


class ProjectionError(ValueError):
    """A projection setting or input array is malformed (the message names it)."""


#: nuisance field -> (unit, meaning); the names parameter-spec targets use as ``camera.<field>``
PROJECTION_FIELDS: dict[str, tuple[str, str]] = {
    "origin_x": ("px", "image column where the anchor point (e.g. the pivot) projects"),
    "origin_y": ("px", "image row where the anchor point projects (negative: above the frame)"),
    "px_per_m": ("px/m", "image scale at the anchor's depth"),
    "roll": ("rad", "camera roll about its optical axis (positive: verticals turn clockwise)"),
    "distance": ("m", "camera distance to the anchor plane for perspective; 0 = orthographic"),
    "radial_k1": ("1", "first radial lens-distortion coefficient about the image centre"),
    "drift_x": ("px/s", "horizontal image drift of the camera during the clip"),
    "drift_y": ("px/s", "vertical image drift of the camera during the clip"),
}


@dataclass(frozen=True)
class ImageProjection:
    """Nuisance camera model of a real clip (see the module docstring for the equations).

    Attributes:
        width, height: image size, px.
        origin_x, origin_y: image position of the anchor, px.
        px_per_m: scale at the anchor's depth, px/m (> 0).
        roll: rad. distance: m (0 = orthographic). radial_k1: dimensionless.
        drift_x, drift_y: px/s.
        right, up: world unit vectors spanning the view plane (image right, image up);
            they must be orthogonal. Depth is ``up × right`` (away from the camera).

    Raises:
        ProjectionError: a size that is not a positive whole number of px, a non-positive scale,
            a negative distance, non-orthogonal axes.
    """

    width: int = 640
    height: int = 480
    origin_x: float = 320.0
    origin_y: float = 0.0
    px_per_m: float = 500.0
    roll: float = 0.0
    distance: float = 0.0
    radial_k1: float = 0.0
    drift_x: float = 0.0
    drift_y: float = 0.0
    right: tuple[float, float, float] = (1.0, 0.0, 0.0)
    up: tuple[float, float, float] = (0.0, 0.0, 1.0)

    def __post_init__(self) -> None:
        for k in ("width", "height"):  # was: 64.5 cut to 64 by the twin's int() without a word
            v = whole_px(getattr(self, k))
            if v is None or v <= 0:
                raise ProjectionError(f"projection '{k}' must be a positive whole number of px, got "
                                      f"{getattr(self, k)!r}")
            object.__setattr__(self, k, v)
        for f in PROJECTION_FIELDS:
            v = getattr(self, f)
            if not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ProjectionError(f"projection field '{f}' must be a finite number, got {v!r}")
        if self.px_per_m <= 0:
            raise ProjectionError(f"projection 'px_per_m' must be > 0, got {self.px_per_m}")
        if self.distance < 0:
            raise ProjectionError(f"projection 'distance' must be >= 0 m (0 = orthographic), got {self.distance}")
        r, u = np.asarray(self.right, float), np.asarray(self.up, float)
        if r.shape != (3,) or u.shape != (3,):
            raise ProjectionError(f"projection axes 'right' and 'up' must be 3-vectors, got {self.right}, {self.up}")
        if abs(np.linalg.norm(r) - 1) > 1e-6 or abs(np.linalg.norm(u) - 1) > 1e-6 or abs(r @ u) > 1e-6:
            raise ProjectionError(f"projection axes must be orthogonal unit vectors, got right={self.right}, up={self.up}")
        object.__setattr__(self, "right", tuple(float(x) for x in r))
        object.__setattr__(self, "up", tuple(float(x) for x in u))

    @classmethod
    def from_config(cls, cfg: Mapping[str, object], *, source: str = "projection") -> "ImageProjection":
        """Build from a mapping of field names (see :data:`PROJECTION_FIELDS`, ``width``,
        ``height``, ``right``, ``up``).

        Raises:
            ProjectionError: naming ``source`` and any unknown key (lists valid keys).
        """
        known = {f.name for f in fields(cls)}
        unknown = [k for k in cfg if k not in known]
        if unknown:
            raise ProjectionError(f"{source}: unknown key(s) {unknown}; valid: {', '.join(sorted(known))}")
        kw = {k: (tuple(v) if k in ("right", "up") else v) for k, v in cfg.items()}
        return cls(**kw)

    def with_values(self, values: Mapping[str, float]) -> "ImageProjection":
        """Copy with some nuisance fields replaced.

        Raises:
            ProjectionError: on a name not in :data:`PROJECTION_FIELDS`.
        """
        bad = [k for k in values if k not in PROJECTION_FIELDS]
        if bad:
            raise ProjectionError(f"unknown projection field(s) {bad}; valid: {', '.join(PROJECTION_FIELDS)}")
        return replace(self, **{k: float(v) for k, v in values.items()})

    @property
    def depth_axis(self) -> np.ndarray:
        """Unit vector pointing away from the camera, shape (3,)."""
        return np.cross(np.asarray(self.up), np.asarray(self.right))

    def project(self, points: np.ndarray, anchor: Sequence[float], time: np.ndarray | None = None) -> np.ndarray:
        """Project world points to pixels.

        Args:
            points: world positions, shape (T, K, 3) m (or (K, 3) for one instant).
            anchor: world position of the anchor point, shape (3,) m.
            time: video time of each of the T rows, shape (T,) s; needed for drift
                (default: zero drift time).

        Returns:
            Pixel positions, shape (T, K, 2) (or (K, 2)), x = column, y = row.

        Raises:
            ProjectionError: on a shape mismatch, or a point at or behind the camera
                (perspective only).
        """
        p = np.asarray(points, dtype=float)
        single = p.ndim == 2
        if single:
            p = p[None]
        if p.ndim != 3 or p.shape[2] != 3:
            raise ProjectionError(f"points must have shape (T, K, 3) or (K, 3), got {np.shape(points)}")
        d = p - np.asarray(anchor, dtype=float).reshape(1, 1, 3)
        h = d @ np.asarray(self.right)
        v = d @ np.asarray(self.up)
        s = np.full(h.shape, self.px_per_m)
        if self.distance > 0:
            z = d @ self.depth_axis
            denom = self.distance + z
            if np.any(denom <= 1e-9):
                raise ProjectionError("a point lies at or behind the camera (depth <= -distance)")
            s = self.px_per_m * self.distance / denom
        c, sn = math.cos(self.roll), math.sin(self.roll)
        du = s * (c * h + sn * v)          # R(roll) @ (h, -v)
        dv = s * (sn * h - c * v)
        u = self.origin_x + du
        w = self.origin_y + dv
        if self.radial_k1 != 0.0:
            cx, cy = (self.width - 1) / 2.0, (self.height - 1) / 2.0
            half = self.width / 2.0
            r2 = ((u - cx) ** 2 + (w - cy) ** 2) / half ** 2
            f = 1.0 + self.radial_k1 * r2
            u = cx + (u - cx) * f
            w = cy + (w - cy) * f
        if time is not None and (self.drift_x != 0.0 or self.drift_y != 0.0):
            t = np.asarray(time, dtype=float).ravel()
            if t.shape[0] != u.shape[0]:
                raise ProjectionError(f"time has {t.shape[0]} entries for {u.shape[0]} rows of points")
            u = u + self.drift_x * t[:, None]
            w = w + self.drift_y * t[:, None]
        out = np.stack([u, w], axis=-1)
        return out[0] if single else out

    def as_camera(self, anchor: Sequence[float], time: float = 0.0, *, ortho_distance: float = 10.0):
        """The same projection as a :class:`~vid2sid_ros.core.camera.PinholeCamera` (for rendering).

        Perspective (``distance > 0``): a pinhole at ``anchor - distance * depth_axis`` with
        ``fx = fy = px_per_m * distance`` and the principal point at the origin (+ drift
        ``drift * time``); orthographic (``distance == 0``): a parallel camera ``ortho_distance``
        m in front of the anchor with ``fx = fy = px_per_m``. Optical axes: x = cos(roll) right +
        sin(roll) up, y = sin(roll) right - cos(roll) up, z = depth. Both agree with
        :meth:`project` exactly except for ``radial_k1`` (about the image centre in half-widths,
        not OpenCV's normalisation), which a renderer applies to the image afterwards.

        Args:
            anchor: world position of the anchor, (3,) m. time: video time, s (drift).
        """
        from ..core.camera import BODY_TO_OPTICAL, PinholeCamera, matrix_to_rpy

        r, u, n = np.asarray(self.right), np.asarray(self.up), self.depth_axis
        c, s = math.cos(self.roll), math.sin(self.roll)
        opt = np.stack([c * r + s * u, s * r - c * u, n], axis=1)
        roll, pitch, yaw = matrix_to_rpy(opt @ BODY_TO_OPTICAL.T)
        a = np.asarray(anchor, float)
        ortho = self.distance <= 0
        f = self.px_per_m if ortho else self.px_per_m * self.distance
        pos = a - (ortho_distance if ortho else self.distance) * n
        return PinholeCamera(int(self.width), int(self.height), f, f, self.origin_x + self.drift_x * time,
                             self.origin_y + self.drift_y * time, position=tuple(pos), roll=roll, pitch=pitch,
                             yaw=yaw, orthographic=ortho, name="planar projection")

    def distort_image_maps(self):
        """``cv2.remap`` maps (two (H, W) float32) applying ``radial_k1`` to an image, or None when k1 = 0.

        For each output pixel q the source p solves ``q = c + (p - c)(1 + k1 |p - c|^2 / half^2)``
        (fixed-point iteration), c = image centre, half = width / 2.
        """
        if self.radial_k1 == 0.0:
            return None
        H, W = int(self.height), int(self.width)
        v, u = np.mgrid[0:H, 0:W].astype(float)
        cx, cy, half = (W - 1) / 2.0, (H - 1) / 2.0, W / 2.0
        du, dv = u - cx, v - cy
        pu, pv = du.copy(), dv.copy()
        for _ in range(30):
            f = 1.0 + self.radial_k1 * (pu * pu + pv * pv) / half ** 2
            pu, pv = du / f, dv / f
        return (pu + cx).astype(np.float32), (pv + cy).astype(np.float32)

    def scale_px_per_m(self, points: np.ndarray, anchor: Sequence[float]) -> np.ndarray:
        """Local image scale (px/m) at each point, shape of ``points`` without the last axis."""
        p = np.asarray(points, dtype=float)
        if self.distance <= 0:
            return np.full(p.shape[:-1], self.px_per_m)
        z = (p - np.asarray(anchor, float)) @ self.depth_axis
        return self.px_per_m * self.distance / (self.distance + z)


def measure_background_shift(frames: np.ndarray, region: tuple[int, int, int, int], *,
                             usable: np.ndarray | None = None, reference: int | None = None,
                             search_px: int = 15, stride: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Measure how the static background slides in the image (camera drift).

    Normalised cross-correlation (``cv2.matchTemplate``, TM_CCOEFF_NORMED) of a
    high-pass-filtered patch of the reference frame against each usable frame, with
    parabolic sub-pixel refinement of the peak. Frames where the moving object may
    cover the patch must be excluded with ``usable``; their shift is not invented
    (they are simply not measured).

    Args:
        frames: (T, H, W, 3) uint8 RGB.
        region: patch ``(x0, y0, x1, y1)`` px of a textured, static part of the scene.
        usable: (T,) bool, frames that may be measured (default all).
        reference: index of the reference frame (default the first usable one).
        search_px: largest shift searched, px.
        stride: measure every ``stride``-th usable frame.

    Returns:
        ``(index, shift, score)``: frame indices (N,), shift (N, 2) px (x, y) of the
        background relative to the reference, correlation score (N,) in [-1, 1].

    Raises:
        ProjectionError: bad region or no usable frame.
    """
    import cv2

    f = np.asarray(frames)
    if f.ndim != 4 or f.shape[3] != 3:
        raise ProjectionError(f"frames must have shape (T, H, W, 3), got {f.shape}")
    T, H, W = f.shape[:3]
    x0, y0, x1, y1 = (int(v) for v in region)
    m = int(search_px)
    if not (m <= x0 < x1 <= W - m and m <= y0 < y1 <= H - m):
        raise ProjectionError(f"region {region} must lie inside the {W}x{H} image with a {m} px margin")
    ok = np.ones(T, bool) if usable is None else np.asarray(usable, bool)
    idx = np.flatnonzero(ok)[::max(int(stride), 1)]
    if idx.size == 0:
        raise ProjectionError("measure_background_shift: no usable frame")
    ref = int(idx[0] if reference is None else reference)

    def highpass(i: int, ys: slice, xs: slice) -> np.ndarray:
        g = cv2.cvtColor(np.ascontiguousarray(f[i]), cv2.COLOR_RGB2GRAY).astype(np.float32)
        g = cv2.GaussianBlur(g, (0, 0), 1.0) - cv2.GaussianBlur(g, (0, 0), 15.0)
        return g[ys, xs]

    tpl = highpass(ref, slice(y0, y1), slice(x0, x1))
    out_i, out_s, out_c = [], [], []
    for i in idx:
        win = highpass(int(i), slice(y0 - m, y1 + m), slice(x0 - m, x1 + m))
        r = cv2.matchTemplate(win, tpl, cv2.TM_CCOEFF_NORMED)
        _, score, _, (px, py) = cv2.minMaxLoc(r)

        def sub(a: float, b: float, c: float) -> float:
            den = a - 2 * b + c
            return 0.0 if den == 0 else 0.5 * (a - c) / den

        dx = px - m + (sub(r[py, px - 1], r[py, px], r[py, px + 1]) if 0 < px < r.shape[1] - 1 else 0.0)
        dy = py - m + (sub(r[py - 1, px], r[py, px], r[py + 1, px]) if 0 < py < r.shape[0] - 1 else 0.0)
        out_i.append(int(i))
        out_s.append((dx, dy))
        out_c.append(score)
    return np.array(out_i), np.array(out_s, float), np.array(out_c, float)
