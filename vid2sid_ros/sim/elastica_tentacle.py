"""PyElastica twin of a soft, tendon-driven tentacle, in air and under water.

The tentacle is a tapered Cosserat rod (PyElastica 1.0, Gazzola et al. 2018, R. Soc.
open sci. 5:171628) hanging from a fixed mount: the base node and the base element's
directors are clamped (``OneEndFixedBC``), the rod hangs straight down (-z) at rest and
moves in the vertical x-z plane, which a pinhole camera films from the front (the
camera looks along +y, image x = world x, image y = -world z).

Forces and couples, all written as PyElastica forcing classes:

* gravity, ``GravityForces``;
* a tendon-like, distributed bending actuation: at every element interface a couple
  ``M(s) = actuation_gain * u(t) * (r(s) / r_base)^3`` (N*m) about the world y axis,
  with ``u`` the command in [-1, 1] (zero-order hold per command period; positive curls
  toward image right). This is the moment of an active muscle/tendon layer at a fixed
  fraction of the local radius carrying a uniform active stress (moment ~ stress * r^3),
  so the curl ``M / (E I)`` grows toward the thin tip as ``1 / r``. It is applied like
  PyElastica's ``MuscleTorques`` (equal and opposite couples on the two elements of each
  interface), without the travelling wave;
* damping, ``AnalyticalLinearDamper(uniform_damping_constant=damping_constant)``:
  every nodal velocity and element angular velocity decays as ``exp(-damping_constant * t)``;
* under water (``medium="water"``): buoyancy, added mass and quadratic drag, see
  :class:`QuadraticDrag` and :meth:`TentacleTwin._effective_density`.

Parameters (by name, SI units; spec files in ``models/tentacle*_parameters.yaml``):
``youngs_modulus`` (Pa), ``damping_constant`` (1/s), ``actuation_gain`` (N*m),
``density`` (kg/m^3); under water also ``fluid_density`` (kg/m^3),
``drag_normal_coefficient``, ``drag_tangential_coefficient``,
``added_mass_coefficient`` (dimensionless). The geometry (length, base and tip radius)
is measured by the user and is configuration, not a parameter. Video alone observes
only ratios (``youngs_modulus / density``, ``actuation_gain / density``): with density
freed the spec is unidentifiable by any method (``tentacle_allfree_parameters.yaml``
ships as the counter-example for the identifiability check).

Time step: PositionVerlet is explicit, stable while ``dt < 2 / omega_max``. The fastest
mode of a discretised rod is the axial/shear wave across one element, ``omega_max ~ 2 c / dl``
with ``c = sqrt(E / rho)`` (the Courant-Friedrichs-Lewy limit ``dt <= dl / c``; Belytschko,
Liu & Moran, *Nonlinear Finite Elements for Continua and Structures*, 2000, sec. 6.3), and,
for elements longer than they are thick, the shear-rotation mode of one element,
``omega ~ (4/3) c / r``. The twin scales each element's rotary inertia by
``max(1, (dl / r)^2)`` (rotary-inertia scaling, the standard mass-scaling practice for
explicit beam elements, same reference) so that ``dl / c`` is the binding limit, and uses
``dt = dt_safety * dl * sqrt(rho_eff / E)`` with ``dt_safety = 0.5`` (measured limit about
0.8 on this rod, 20 elements, E in 1e5..2e6 Pa, full actuation), shortened so that it
divides the command period. Rotary inertia hardly matters for a slender rod's bending
(Euler-Bernoulli neglects it).

Divergence: after every command period the rollout checks for non-finite positions or
velocities and for any node farther from the base than ``1.1 * length`` (PyElastica can
blow up without NaNs); the rollout then stops with ``RolloutResult(diverged=True)``.

numba: every PyElastica kernel is ``@njit(cache=True)`` (checked for 1.0.0: 90 of 90), and
so are this module's. The cache directory is ``$NUMBA_CACHE_DIR``, set on import to
``~/.cache/vid2sid_ros/numba`` when unset, so the compiled machine code of all kernels
survives across processes (``bench/bench_tentacle.py`` on 2 shared cores: first use, 36
kernels compiled, 38 s at load 2 and 140 s at load 10; a later process imports and runs
its first rollout in about 2 s at load 2, 8 s at load 10). The first use in a cold cache
prints one line saying it is compiling.
"""

from __future__ import annotations

import copy
import glob
import logging
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..core.excitation import Excitation, build_excitation_sets
from ..core.parameters import ParameterSet, ParameterSpecError, load_parameter_set
from ..core.trajectory import Trajectory
from .base import CameraIntrinsics, RolloutLimits, RolloutMeter, RolloutResult, TwinError, whole_px

__all__ = [
    "TentacleTwin", "TentacleGeometry", "TentacleAppearance", "PinholeCamera", "default_config",
    "default_water_config", "make_rig", "make_water_rig", "numba_cache_dir", "stable_time_step", "render_tube",
    "tentacle_tracker_config", "AIR_PARAMETERS", "WATER_PARAMETERS",
    "MODELS_DIR", "PARAMETERS_PATH", "ALLFREE_PARAMETERS_PATH", "WATER_PARAMETERS_PATH",
]

_log = logging.getLogger(__name__)

MODELS_DIR = Path(__file__).resolve().parent / "models"
#: air rig spec: Young's modulus, damping, actuation gain free; density measured (frozen).
PARAMETERS_PATH = MODELS_DIR / "tentacle_parameters.yaml"
#: same, with density freed too: unidentifiable from video (only ratios are observable).
ALLFREE_PARAMETERS_PATH = MODELS_DIR / "tentacle_allfree_parameters.yaml"
#: under-water rig spec: only the environment parameters are free.
WATER_PARAMETERS_PATH = MODELS_DIR / "tentacle_water_parameters.yaml"

AIR_PARAMETERS = ("youngs_modulus", "damping_constant", "actuation_gain", "density")
WATER_PARAMETERS = AIR_PARAMETERS + ("fluid_density", "drag_normal_coefficient", "drag_tangential_coefficient",
                                     "added_mass_coefficient")
_MEDIA = ("air", "water")
#: a node farther than this many rod lengths from the base means the simulation blew up.
_MAX_REACH = 1.1


# -- numba cache ----------------------------------------------------------------------

def numba_cache_dir() -> Path:
    """The numba cache folder in use: ``$NUMBA_CACHE_DIR`` or ``~/.cache/vid2sid_ros/numba``.

    Sets ``NUMBA_CACHE_DIR`` when unset (and numba's config when numba is already
    imported with no cache folder), so PyElastica's ``cache=True`` kernels are stored
    there; must run before PyElastica is imported to affect its kernels.
    """
    given = os.environ.get("NUMBA_CACHE_DIR")
    path = given or str(Path.home() / ".cache" / "vid2sid_ros" / "numba")
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as err:  # e.g. a read-only home: leave numba's default (in-tree __pycache__)
        _log.warning("cannot create numba cache folder %s (%s); numba uses its default cache location", path, err)
        return Path(path)
    os.environ.setdefault("NUMBA_CACHE_DIR", path)
    if "numba" in sys.modules:
        import numba

        if not numba.config.CACHE_DIR:
            numba.config.CACHE_DIR = path
    return Path(path)


_CACHE_DIR = numba_cache_dir()
_cache_was_warm = bool(glob.glob(str(_CACHE_DIR / "**" / "cosserat_rod.*.nbi"), recursive=True))

import numba  # noqa: E402  (after the cache folder is configured)


@numba.njit(cache=True)
def _tendon_torques(moment, axis, director, external_torques):  # pragma: no cover - numba
    """Add interface couples ``moment[i] * axis`` (world) between elements i-1 and i.

    moment (n_elem,) N*m; axis (3,) unit world vector; director (3, 3, n_elem) (rows are the
    material directors); external_torques (3, n_elem) in the material frame (PyElastica).
    """
    n = moment.shape[0]
    for i in range(1, n):
        m = moment[i]
        for a in range(3):
            qi = director[a, 0, i] * axis[0] + director[a, 1, i] * axis[1] + director[a, 2, i] * axis[2]
            qp = (director[a, 0, i - 1] * axis[0] + director[a, 1, i - 1] * axis[1]
                  + director[a, 2, i - 1] * axis[2])
            external_torques[a, i] += m * qi
            external_torques[a, i - 1] -= m * qp


@numba.njit(cache=True)
def _quadratic_drag(velocity, tangents, radius, lengths, fluid_density, c_normal, c_tangential,
                    external_forces):  # pragma: no cover - numba
    """Morison/Taylor quadratic drag per element, split equally onto its two nodes (world frame)."""
    n = radius.shape[0]
    for i in range(n):
        vx = 0.5 * (velocity[0, i] + velocity[0, i + 1])
        vy = 0.5 * (velocity[1, i] + velocity[1, i + 1])
        vz = 0.5 * (velocity[2, i] + velocity[2, i + 1])
        tx, ty, tz = tangents[0, i], tangents[1, i], tangents[2, i]
        vt = vx * tx + vy * ty + vz * tz
        nx, ny, nz = vx - vt * tx, vy - vt * ty, vz - vt * tz
        vn = math.sqrt(nx * nx + ny * ny + nz * nz)
        d = 2.0 * radius[i]
        kn = -0.5 * fluid_density * c_normal * d * lengths[i] * vn
        kt = -0.5 * fluid_density * c_tangential * math.pi * d * lengths[i] * abs(vt) * vt
        fx, fy, fz = kn * nx + kt * tx, kn * ny + kt * ty, kn * nz + kt * tz
        external_forces[0, i] += 0.5 * fx
        external_forces[1, i] += 0.5 * fy
        external_forces[2, i] += 0.5 * fz
        external_forces[0, i + 1] += 0.5 * fx
        external_forces[1, i + 1] += 0.5 * fy
        external_forces[2, i + 1] += 0.5 * fz


_elastica = None
_printed_compile_notice = False


def _import_elastica():
    """Import PyElastica once (after the numba cache is configured); say so when compiling."""
    global _elastica, _printed_compile_notice
    if _elastica is None:
        if not _cache_was_warm and not _printed_compile_notice:
            _printed_compile_notice = True
            print(f"vid2sid_ros: compiling PyElastica numba kernels (first run only, about 40 s to 2 min); "
                  f"cached in {_CACHE_DIR}", file=sys.stderr, flush=True)
        import elastica

        _elastica = elastica
    return _elastica


# -- geometry, camera, appearance --------------------------------------------------------

@dataclass(frozen=True)
class TentacleGeometry:
    """Measured rest geometry of the tentacle.

    Attributes:
        length: rest length, m.
        base_radius, tip_radius: radius at the base and at the tip, m; linear taper.
        n_elements: Cosserat rod elements (nodes = n_elements + 1); 16-30 keeps it fast.

    Raises:
        TwinError: on a non-positive size, a tip thicker than the base, or n_elements < 4.
    """

    length: float = 0.2
    base_radius: float = 0.012
    tip_radius: float = 0.005
    n_elements: int = 20

    def __post_init__(self) -> None:
        for name in ("length", "base_radius", "tip_radius"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise TwinError(f"tentacle geometry: '{name}' must be a positive number of metres, got {v!r}")
        if self.tip_radius > self.base_radius:
            raise TwinError(f"tentacle geometry: tip_radius {self.tip_radius} m exceeds "
                            f"base_radius {self.base_radius} m")
        if not (isinstance(self.n_elements, int) and self.n_elements >= 4):
            raise TwinError(f"tentacle geometry: n_elements must be an integer >= 4, got {self.n_elements!r}")

    @property
    def element_length(self) -> float:
        """Rest length of one element, m."""
        return self.length / self.n_elements

    def element_radii(self) -> np.ndarray:
        """Radius at each element centre, shape (n_elements,), m."""
        s = (np.arange(self.n_elements) + 0.5) / self.n_elements
        return self.base_radius + (self.tip_radius - self.base_radius) * s

    def node_radii(self) -> np.ndarray:
        """Radius at each node, shape (n_elements + 1,), m."""
        s = np.arange(self.n_elements + 1) / self.n_elements
        return self.base_radius + (self.tip_radius - self.base_radius) * s


class PinholeCamera:
    """A pinhole camera: intrinsics plus a pose given by position, look-at point and up vector.

    Args:
        intrinsics: image size and focal lengths / principal point, px.
        position: camera centre in world coordinates, m, (3,).
        look_at: a world point on the optical axis, m, (3,).
        up: world direction that appears upward in the image, (3,).

    Raises:
        TwinError: when position == look_at or up is parallel to the optical axis.
    """

    def __init__(self, intrinsics: CameraIntrinsics, position: Sequence[float], look_at: Sequence[float],
                 up: Sequence[float] = (0.0, 0.0, 1.0)) -> None:
        self.intrinsics = intrinsics
        self.position = np.asarray(position, dtype=float)
        fwd = np.asarray(look_at, dtype=float) - self.position
        if np.linalg.norm(fwd) < 1e-9:
            raise TwinError("camera: 'position' and 'look_at' coincide")
        fwd /= np.linalg.norm(fwd)
        right = np.cross(fwd, np.asarray(up, dtype=float))
        if np.linalg.norm(right) < 1e-9:
            raise TwinError("camera: 'up' is parallel to the viewing direction")
        right /= np.linalg.norm(right)
        down = np.cross(fwd, right)
        #: world -> camera rotation; rows: image x (right), image y (down), optical axis.
        self.rotation = np.stack([right, down, fwd])

    def project(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Project world points.

        Args:
            points: (..., 3) m.

        Returns:
            ``(uv, depth)``: uv (..., 2) px (pixel centres at integer coordinates, OpenCV
            convention), depth (...,) m along the optical axis (NaN uv behind the camera).
        """
        pc = (np.asarray(points, dtype=float) - self.position) @ self.rotation.T
        z = pc[..., 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            zs = np.where(z > 1e-9, z, np.nan)
            u = self.intrinsics.fx * pc[..., 0] / zs + self.intrinsics.cx
            v = self.intrinsics.fy * pc[..., 1] / zs + self.intrinsics.cy
        return np.stack([u, v], axis=-1), z


@dataclass(frozen=True)
class TentacleAppearance:
    """How the rendered tentacle and its scene look.

    Attributes:
        tentacle_rgb: albedo of the tube, RGB 0-255 (default silicone orange).
        mount_rgb: colour of the base mount block.
        background: ``"plain"`` (vertical grey gradient), ``"water"`` (blue-green tank)
            or ``"clutter"`` (plain plus random shapes in colours away from the tube's hue).
        clutter_seed: seed of the clutter layout.
        clutter_shapes: number of clutter shapes.
    """

    tentacle_rgb: tuple[int, int, int] = (235, 120, 35)
    mount_rgb: tuple[int, int, int] = (60, 60, 66)
    background: str = "plain"
    clutter_seed: int = 0
    clutter_shapes: int = 14

    def __post_init__(self) -> None:
        if self.background not in ("plain", "water", "clutter"):
            raise TwinError(f"appearance: background must be 'plain', 'water' or 'clutter', got {self.background!r}")


def _background(appearance: TentacleAppearance, width: int, height: int, medium: str) -> np.ndarray:
    """Static scene behind the tentacle, (H, W, 3) uint8 RGB."""
    import cv2

    y = np.linspace(0.0, 1.0, height)[:, None, None]
    if appearance.background == "water" or (medium == "water" and appearance.background == "plain"):
        top, bottom = np.array([150.0, 190.0, 205.0]), np.array([70.0, 120.0, 150.0])
    else:
        top, bottom = np.array([205.0, 205.0, 200.0]), np.array([160.0, 162.0, 165.0])
    bg = np.broadcast_to(top + (bottom - top) * y, (height, width, 3)).astype(np.uint8).copy()
    if appearance.background == "clutter":
        rng = np.random.default_rng(appearance.clutter_seed)
        # hues (OpenCV, 0..180) away from the orange tube (~10-20): blues, greens, purples, greys
        for _ in range(appearance.clutter_shapes):
            hue = int(rng.choice([35, 55, 75, 95, 110, 125, 140]))
            sat = int(rng.integers(0, 160))
            val = int(rng.integers(50, 230))
            rgb = cv2.cvtColor(np.uint8([[[hue, sat, val]]]), cv2.COLOR_HSV2RGB)[0, 0].tolist()
            kind = rng.integers(0, 3)
            cx, cy = int(rng.integers(0, width)), int(rng.integers(0, height))
            sz = int(rng.integers(max(4, width // 40), max(8, width // 6)))
            if kind == 0:
                cv2.rectangle(bg, (cx, cy), (cx + sz, cy + int(sz * rng.uniform(0.4, 1.5))), rgb, -1, cv2.LINE_AA)
            elif kind == 1:
                cv2.circle(bg, (cx, cy), sz // 2, rgb, -1, cv2.LINE_AA)
            else:
                ex = cx + int(rng.integers(-width // 3, width // 3))
                ey = cy + int(rng.integers(-height // 3, height // 3))
                cv2.line(bg, (cx, cy), (ex, ey), rgb, int(rng.integers(1, 4)), cv2.LINE_AA)
    return bg


def render_tube(image: np.ndarray, centerline_px: np.ndarray, radius_px: np.ndarray,
                rgb: Sequence[int] = (235, 120, 35)) -> np.ndarray:
    """Draw a shaded, anti-aliased tube of varying radius into ``image`` (in place).

    The tube is the union of capsules (segment between consecutive nodes, radius
    interpolated linearly along it); shading is that of a Lambertian cylinder lit from
    the camera (``0.35 + 0.65 * sqrt(1 - q^2)`` with ``q`` the distance from the centreline
    over the local radius) plus a narrow highlight. Later segments are drawn over earlier
    ones that are more than two segments away along the tube (a curled tip passes in
    front), while neighbouring segments merge smoothly.

    Args:
        image: (H, W, 3) uint8 RGB, modified in place and returned.
        centerline_px: (N, 2) node positions, px (pixel centres at integer coordinates).
        radius_px: (N,) radius at each node, px.
        rgb: tube albedo, 0-255.

    Returns:
        ``image``.
    """
    h, w = image.shape[:2]
    pts = np.asarray(centerline_px, dtype=float)
    rad = np.asarray(radius_px, dtype=float)
    if pts.ndim != 2 or pts.shape[0] < 2 or not np.all(np.isfinite(pts)):
        return image
    n_seg = pts.shape[0] - 1
    lo = np.floor(np.minimum(pts[:-1], pts[1:]) - np.maximum(rad[:-1], rad[1:])[:, None] - 2).astype(int)
    hi = np.ceil(np.maximum(pts[:-1], pts[1:]) + np.maximum(rad[:-1], rad[1:])[:, None] + 2).astype(int)
    x0, y0 = max(0, lo[:, 0].min()), max(0, lo[:, 1].min())
    x1, y1 = min(w, hi[:, 0].max() + 1), min(h, hi[:, 1].max() + 1)
    if x1 <= x0 or y1 <= y0:
        return image
    bh, bw = y1 - y0, x1 - x0
    best_q = np.full((bh, bw), np.inf)
    best_seg = np.full((bh, bw), -10, dtype=int)
    alpha = np.zeros((bh, bw))
    for j in range(n_seg):
        sx0, sy0 = max(lo[j, 0], x0), max(lo[j, 1], y0)
        sx1, sy1 = min(hi[j, 0] + 1, x1), min(hi[j, 1] + 1, y1)
        if sx1 <= sx0 or sy1 <= sy0:
            continue
        a, b = pts[j], pts[j + 1]
        ab = b - a
        L2 = float(ab @ ab)
        dx = np.arange(sx0, sx1, dtype=float)[None, :] - a[0]  # (1, w) and (h, 1): broadcast to (h, w)
        dy = np.arange(sy0, sy1, dtype=float)[:, None] - a[1]
        if L2 < 1e-12:
            t = np.zeros((sy1 - sy0, sx1 - sx0))
        else:
            t = np.minimum(np.maximum((dx * (ab[0] / L2) + dy * (ab[1] / L2)), 0.0), 1.0)
        d = np.hypot(dx - t * ab[0], dy - t * ab[1])
        r = rad[j] + t * (rad[j + 1] - rad[j])
        cover = np.minimum(np.maximum(r - d + 0.5, 0.0), 1.0)
        q = d / np.maximum(r, 1e-6)
        sl = (slice(sy0 - y0, sy1 - y0), slice(sx0 - x0, sx1 - x0))
        bq, bs, ba = best_q[sl], best_seg[sl], alpha[sl]
        near = (np.abs(bs - j) <= 2) | (bs < 0)  # empty pixels and neighbouring segments merge
        take = (cover > 0) & ((near & (q < bq)) | (~near & (cover >= 0.5)))
        bq[take] = q[take]
        bs[take] = j
        ba[:] = np.where(near | (cover >= 0.5), np.maximum(ba, cover), ba)
    qq = np.clip(best_q, 0.0, 1.0)
    shade = 0.35 + 0.65 * np.sqrt(1.0 - qq * qq)
    highlight = 70.0 * np.exp(-((qq / 0.25) ** 2))
    tube = np.clip(shade[..., None] * np.asarray(rgb, dtype=float) + highlight[..., None] * 0.6, 0, 255)
    roi = image[y0:y1, x0:x1].astype(float)
    out = alpha[..., None] * tube + (1.0 - alpha[..., None]) * roi
    image[y0:y1, x0:x1] = np.clip(np.rint(out), 0, 255).astype(np.uint8)
    return image


# -- forcing ----------------------------------------------------------------------------

def _forcing_classes():
    ea = _import_elastica()

    class TendonMoment(ea.NoForces):
        """Tendon-like bending actuation: interface couples ``command[0] * moment_per_command`` about ``axis``.

        Args:
            moment_per_command: (n_elem,) N*m per unit command (index 0 unused: the base).
            axis: (3,) unit world axis of the couples.
            command: (1,) array holding the current command; the twin writes it.
        """

        def __init__(self, moment_per_command: np.ndarray, axis: np.ndarray, command: np.ndarray) -> None:
            super().__init__()
            self.moment_per_command = np.ascontiguousarray(moment_per_command, dtype=np.float64)
            self.axis = np.ascontiguousarray(axis, dtype=np.float64)
            self.command = command
            self._moment = np.zeros_like(self.moment_per_command)
            self._moment_command = 0.0  # the command self._moment was computed for

        def apply_torques(self, system, time=np.float64(0.0)) -> None:
            u = self.command[0]
            if u != 0.0:
                if u != self._moment_command:  # once per command period, not once per substep
                    np.multiply(self.moment_per_command, u, out=self._moment)
                    self._moment_command = u
                _tendon_torques(self._moment, self.axis, system.director_collection, system.external_torques)

    class QuadraticDrag(ea.NoForces):
        """Quadratic fluid drag on each element, normal and tangential components apart.

        Per element of diameter ``d = 2 r``, length ``l`` and velocity ``v`` (mean of its
        nodes), split into ``v_t = (v . t) t`` along the tangent and ``v_n = v - v_t``:
        ``F_n = -1/2 rho_f C_n d l |v_n| v_n`` (pressure drag on the projected area) and
        ``F_t = -1/2 rho_f C_t (pi d) l |v_t| v_t`` (skin friction on the wetted
        perimeter), the independence principle of Taylor (1952, Proc. R. Soc. A 214,
        158-183) with Morison-type coefficients (Morison et al. 1950, Petroleum Trans.
        189, 149-154). Still fluid; forces in the world frame, half on each node.
        """

        def __init__(self, fluid_density: float, c_normal: float, c_tangential: float) -> None:
            super().__init__()
            self.fluid_density = float(fluid_density)
            self.c_normal = float(c_normal)
            self.c_tangential = float(c_tangential)

        def apply_forces(self, system, time=np.float64(0.0)) -> None:
            _quadratic_drag(system.velocity_collection, system.tangents, system.radius, system.lengths,
                            self.fluid_density, self.c_normal, self.c_tangential, system.external_forces)

    class _Simulator(ea.BaseSystemCollection, ea.Constraints, ea.Forcing, ea.Damping):
        pass

    return TendonMoment, QuadraticDrag, _Simulator


_CLASSES: tuple | None = None


def _classes():
    global _CLASSES
    if _CLASSES is None:
        _CLASSES = _forcing_classes()
    return _CLASSES


def __getattr__(name: str):  # TendonMoment / QuadraticDrag need PyElastica; import it on first use
    if name == "TendonMoment":
        return _classes()[0]
    if name == "QuadraticDrag":
        return _classes()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def stable_time_step(youngs_modulus: float, density: float, element_length: float, *,
                     safety: float = 0.5) -> float:
    """Explicit-integrator time step ``safety * dl * sqrt(rho / E)``, s.

    The Courant-Friedrichs-Lewy limit of the axial wave across one element (see the
    module docstring for the source and why the rotary-inertia scaling makes it binding).

    Args:
        youngs_modulus: Pa. density: inertial density (with added mass), kg/m^3.
        element_length: m. safety: fraction of the limit, in (0, 1].

    Raises:
        TwinError: on a non-positive input.
    """
    if not (youngs_modulus > 0 and density > 0 and element_length > 0 and 0 < safety <= 1):
        raise TwinError(f"stable_time_step: need E > 0, rho > 0, dl > 0, 0 < safety <= 1; got E={youngs_modulus}, "
                        f"rho={density}, dl={element_length}, safety={safety}")
    return float(safety * element_length * math.sqrt(density / youngs_modulus))


# -- the twin ---------------------------------------------------------------------------

class TentacleTwin:
    """Simulated soft tentacle filmed by a fixed camera (implements ``Twin`` and ``SteppableTwin``).

    Args:
        parameters: a :class:`ParameterSet` or spec YAML path; default the shipped spec
            of the medium. Must name exactly the medium's parameters
            (:data:`AIR_PARAMETERS` or :data:`WATER_PARAMETERS`).
        medium: ``"air"`` or ``"water"``.
        geometry: :class:`TentacleGeometry` or a dict of its fields.
        gravity: m/s^2 (world -z).
        width, height: image size, px; the camera intrinsics below are given at
            ``reference_size`` and scaled.
        camera: ``{"fx", "fy", "cx", "cy", "reference_size": [w, h], "position",
            "look_at", "up"}`` (px at the reference size; m).
        num_keypoints: K centreline keypoints ``c0..c{K-1}`` at rest arc lengths
            ``(k + 1) / K * length`` (the fixed base itself is not a keypoint; c{K-1} is the tip).
        dt_safety: fraction of the stability limit used as time step (see module docstring).
        appearance: :class:`TentacleAppearance` or a dict of its fields.
        noise: keyword arguments of ``vid2sid_ros.sim.camera_model.SensorNoiseModel``
            applied to rendered frames, or None for clean frames.

    Raises:
        TwinError: unknown medium, bad geometry/camera, spec names that do not match the medium.
        ParameterSpecError: malformed spec file.
    """

    actuator_names: tuple[str, ...] = ("tendon",)
    #: file suffix of :meth:`export_model` (the calibration loop names the model copy with it).
    model_suffix: str = ".yaml"
    #: cost cap of one rollout (:class:`~vid2sid_ros.sim.base.RolloutLimits`); the loop sets it
    rollout_limits: RolloutLimits = RolloutLimits()

    def __init__(self, *, parameters: ParameterSet | str | Path | None = None, medium: str = "air",
                 geometry: TentacleGeometry | Mapping[str, Any] | None = None, gravity: float = 9.81,
                 width: int = 320, height: int = 240, camera: Mapping[str, Any] | None = None,
                 num_keypoints: int = 10, dt_safety: float = 0.5,
                 appearance: TentacleAppearance | Mapping[str, Any] | None = None,
                 noise: Mapping[str, Any] | None = None) -> None:
        if medium not in _MEDIA:
            raise TwinError(f"tentacle twin: medium must be one of {_MEDIA}, got {medium!r}")
        self.medium = medium
        if parameters is None:
            parameters = PARAMETERS_PATH if medium == "air" else WATER_PARAMETERS_PATH
        self.parameters: ParameterSet = (parameters if isinstance(parameters, ParameterSet)
                                         else load_parameter_set(parameters))
        expected = AIR_PARAMETERS if medium == "air" else WATER_PARAMETERS
        if sorted(self.parameters.names) != sorted(expected):
            raise TwinError(f"tentacle twin ({medium}): parameter spec {self.parameters.source} names "
                            f"{self.parameters.names}; expected exactly {list(expected)}")
        if isinstance(geometry, Mapping):
            unknown = [k for k in geometry if k not in TentacleGeometry.__dataclass_fields__]
            if unknown:
                raise TwinError(f"tentacle geometry: unknown field(s) {unknown}; valid: "
                                f"{', '.join(TentacleGeometry.__dataclass_fields__)}")
            geometry = TentacleGeometry(**geometry)
        self.geometry: TentacleGeometry = geometry or TentacleGeometry()
        if isinstance(appearance, Mapping):
            unknown = [k for k in appearance if k not in TentacleAppearance.__dataclass_fields__]
            if unknown:
                raise TwinError(f"tentacle appearance: unknown field(s) {unknown}; valid: "
                                f"{', '.join(TentacleAppearance.__dataclass_fields__)}")
            appearance = TentacleAppearance(**{k: tuple(v) if isinstance(v, list) else v
                                               for k, v in appearance.items()})
        self.appearance: TentacleAppearance = appearance or TentacleAppearance()
        if not (gravity >= 0 and math.isfinite(gravity)):
            raise TwinError(f"tentacle twin: gravity must be >= 0 m/s^2, got {gravity}")
        self.gravity = float(gravity)
        if not (isinstance(num_keypoints, int) and num_keypoints >= 2):
            raise TwinError(f"tentacle twin: num_keypoints must be an integer >= 2, got {num_keypoints!r}")
        if not 0 < dt_safety <= 1:
            raise TwinError(f"tentacle twin: dt_safety must be in (0, 1], got {dt_safety}")
        self.dt_safety = float(dt_safety)
        self.keypoint_names: tuple[str, ...] = tuple(f"c{k}" for k in range(num_keypoints))
        self._keypoint_s = (np.arange(num_keypoints) + 1.0) / num_keypoints * self.geometry.length
        for k, v in (("width", width), ("height", height)):  # was: 64.5 cut to 64 without a word
            if whole_px(v) is None:
                raise TwinError(f"tentacle twin: image {k} must be a whole number of px, got {v!r}")
        self._view = self._make_camera(camera or {}, whole_px(width), whole_px(height))
        self.camera: CameraIntrinsics = self._view.intrinsics
        self._noise_cfg = dict(noise) if noise else None
        self._noise_model = None
        self._bg: np.ndarray | None = None
        self._values: dict[str, float] = {}
        self._sim = None
        self._rod = None
        self._stepper = None
        self._command = np.zeros(1)
        self._period: float | None = None
        self._substeps = 0
        self._dt = 0.0
        self._time = 0.0
        self._steps_done = 0
        self.set_parameters(self.parameters.nominal())

    # -- configuration helpers -------------------------------------------------------
    @staticmethod
    def _make_camera(cfg: Mapping[str, Any], width: int, height: int) -> PinholeCamera:
        known = ("fx", "fy", "cx", "cy", "reference_size", "position", "look_at", "up")
        unknown = [k for k in cfg if k not in known]
        if unknown:
            raise TwinError(f"tentacle camera: unknown field(s) {unknown}; valid: {', '.join(known)}")
        if width < 16 or height < 16:
            raise TwinError(f"tentacle camera: image size must be at least 16 x 16 px, got {width} x {height}")
        rw, rh = cfg.get("reference_size", (320, 240))
        sx, sy = width / float(rw), height / float(rh)
        intr = CameraIntrinsics(width, height, float(cfg.get("fx", 420.0)) * sx, float(cfg.get("fy", 420.0)) * sy,
                                (float(cfg.get("cx", 159.5)) + 0.5) * sx - 0.5,
                                (float(cfg.get("cy", 119.5)) + 0.5) * sy - 0.5)
        return PinholeCamera(intr, cfg.get("position", (0.0, -0.6, -0.1)),
                             cfg.get("look_at", (0.0, 0.0, -0.1)), cfg.get("up", (0.0, 0.0, 1.0)))

    @property
    def base_px(self) -> tuple[float, float]:
        """Image position of the fixed base node, px (for the centreline tracker)."""
        uv, _ = self._view.project(np.zeros(3))
        return float(uv[0]), float(uv[1])

    @property
    def length_px(self) -> float:
        """Projected rest length of the straight, hanging tentacle, px (tracker length prior)."""
        uv, _ = self._view.project(np.array([[0.0, 0.0, 0.0], [0.0, 0.0, -self.geometry.length]]))
        return float(np.linalg.norm(uv[1] - uv[0]))

    def tracker_config(self) -> dict[str, Any]:
        """Configuration of :class:`vid2sid_ros.perception.centerline.CenterlineTracker` for this camera."""
        return tentacle_tracker_config(self)

    # -- parameters -----------------------------------------------------------------
    def set_parameters(self, values: Mapping[str, float]) -> None:
        """Write parameters by name (spec units); they take effect at the next reset/rollout.

        Raises:
            ParameterSpecError: on an unknown name or a non-finite / non-positive value.
        """
        self.parameters.check_names(values, require_all=False)
        for k, v in values.items():
            v = float(v)
            positive = k in ("youngs_modulus", "density", "fluid_density")
            if not math.isfinite(v) or v < 0 or (positive and v == 0):
                need = "> 0" if positive else ">= 0"
                raise ParameterSpecError(f"tentacle twin: parameter '{k}' must be a finite number {need}, got {v!r}")
        self._values.update({k: float(v) for k, v in values.items()})
        self._sim = None  # rebuilt at the next reset

    def get_parameters(self) -> dict[str, float]:
        """Current values of every parameter, ``{name: value}``."""
        return dict(self._values)

    def _effective_density(self) -> float:
        """Inertial density, kg/m^3: the rod's plus, under water, the added mass ``C_a * rho_f``.

        The added mass of a cylinder moving normal to its axis is ``C_a rho_f pi r^2`` per
        unit length (``C_a = 1`` for potential flow; Newman, *Marine Hydrodynamics*, 1977,
        sec. 4.13). It is applied isotropically (also along the axis and to the rotary
        inertia), an approximation that is good while the motion is mostly normal to
        the rod, as for a clamped tentacle.
        """
        rho = self._values["density"]
        if self.medium == "water":
            rho += self._values["added_mass_coefficient"] * self._values["fluid_density"]
        return rho

    def _net_gravity(self) -> float:
        """Downward acceleration applied to the (effective) nodal masses, m/s^2 (buoyancy included)."""
        if self.medium == "air":
            return self.gravity
        rho, rho_f = self._values["density"], self._values["fluid_density"]
        return self.gravity * (rho - rho_f) / self._effective_density()

    def rollout_cost_bound(self, parameters: ParameterSet, excitations: Sequence[Excitation]) -> tuple[int, str]:
        """Largest substep count one rollout can need inside ``parameters``' bounds.

        The stable step ``dt = dt_safety * dl * sqrt(rho_eff / E)`` is shortest at the
        largest free ``youngs_modulus`` and the smallest free inertial density (rod
        density, plus added mass under water); frozen parameters count at their nominal.

        Returns:
            ``(substeps, explanation)`` for the longest excitation.
        """
        def extreme(name: str, high: bool) -> float:
            spec = parameters[name] if name in parameters else None
            if spec is None:
                return self._values[name]
            return spec.nominal if spec.frozen else (spec.upper if high else spec.lower)

        E = extreme("youngs_modulus", True)
        rho = extreme("density", False)
        if self.medium == "water":
            rho += extreme("added_mass_coefficient", False) * extreme("fluid_density", False)
        dt = stable_time_step(E, rho, self.geometry.element_length, safety=self.dt_safety)
        worst, why = 0, ""
        for exc in excitations:
            per = max(1, math.ceil(exc.period / dt - 1e-9))
            if exc.num_steps * per > worst:
                worst = exc.num_steps * per
                why = (f"youngs_modulus {E:.3g} Pa with inertial density {rho:.4g} kg/m^3 gives dt {dt:.3g} s, "
                       f"{per:,} substeps per {exc.period:.4g} s frame, {exc.num_steps} frames ('{exc.name}')")
        return worst, why

    def time_step(self, period: float | None = None) -> float:
        """Integration time step for the current parameters, s (divides ``period`` when given)."""
        dt = stable_time_step(self._values["youngs_modulus"], self._effective_density(),
                              self.geometry.element_length, safety=self.dt_safety)
        if period is None:
            return dt
        return period / max(1, math.ceil(period / dt - 1e-9))

    # -- simulation -----------------------------------------------------------------
    def _build(self, period: float) -> None:
        ea = _import_elastica()
        TendonMoment, QuadraticDrag, Simulator = _classes()
        g = self.geometry
        rho_eff = self._effective_density()
        sim = Simulator()
        rod = ea.CosseratRod.straight_rod(
            g.n_elements, np.zeros(3), np.array([0.0, 0.0, -1.0]), np.array([1.0, 0.0, 0.0]),
            g.length, g.element_radii(), rho_eff, youngs_modulus=self._values["youngs_modulus"])
        # rotary-inertia scaling (module docstring): elements thinner than long get the
        # rotational inertia of an element of radius dl.
        scale = np.maximum(1.0, (g.element_length / g.element_radii()) ** 2)
        rod.mass_second_moment_of_inertia[...] *= scale[None, None, :]
        rod.inv_mass_second_moment_of_inertia[...] /= scale[None, None, :]
        sim.append(rod)
        sim.constrain(rod).using(ea.OneEndFixedBC, constrained_position_idx=(0,), constrained_director_idx=(0,))
        sim.add_forcing_to(rod).using(ea.GravityForces, acc_gravity=np.array([0.0, 0.0, -self._net_gravity()]))
        moment = self._values["actuation_gain"] * (g.element_radii() / g.base_radius) ** 3
        # a positive couple about -y curls the hanging rod toward +x (image right)
        sim.add_forcing_to(rod).using(TendonMoment, moment_per_command=moment, axis=np.array([0.0, -1.0, 0.0]),
                                      command=self._command)
        if self.medium == "water":
            sim.add_forcing_to(rod).using(QuadraticDrag, fluid_density=self._values["fluid_density"],
                                          c_normal=self._values["drag_normal_coefficient"],
                                          c_tangential=self._values["drag_tangential_coefficient"])
        dt = self.time_step(period)
        sim.dampen(rod).using(ea.AnalyticalLinearDamper, uniform_damping_constant=self._values["damping_constant"],
                              time_step=np.float64(dt))
        sim.finalize()
        self._sim, self._rod, self._stepper = sim, rod, ea.PositionVerlet()
        self._period, self._dt = period, dt
        self._substeps = int(round(period / dt))

    def reset(self, period: float | None = None) -> None:
        """Back to rest (straight, hanging, zero command) with the current parameters.

        Args:
            period: command period the next steps will use, s (default: the last one, or 1/30 s).
        """
        self._build(float(period or self._period or 1.0 / 30.0))
        self._command[0] = 0.0
        self._time = 0.0
        self._steps_done = 0

    def step(self, command: Sequence[float], period: float) -> None:
        """Apply ``command`` (1,) for one command period of ``period`` s (``SteppableTwin``).

        Raises:
            TwinError: wrong command length, the period changes within a trial
                (call :meth:`reset` with the new period first), or one period alone needs
                more substeps than :attr:`rollout_limits` allow (checked before stepping).
        """
        cmd = np.asarray(command, dtype=float).ravel()
        if cmd.shape[0] != 1 or not np.isfinite(cmd[0]):
            raise TwinError(f"tentacle twin: expected one finite command ({self.actuator_names}), got {command!r}")
        if self._sim is None or self._steps_done == 0:  # one command period must fit the rollout budget
            per = max(1, math.ceil(period / self.time_step() - 1e-9))
            problem = self.rollout_limits.substeps_problem(
                per, f"one {period:.4g} s command period at youngs_modulus {self._values['youngs_modulus']:.3g} Pa")
            if problem:
                raise TwinError(f"tentacle twin: {problem}")
        if self._sim is None or (self._steps_done == 0 and not math.isclose(period, self._period or 0.0)):
            self.reset(period)
        elif not math.isclose(period, self._period):
            raise TwinError(f"tentacle twin: command period changed from {self._period} s to {period} s within a "
                            f"trial; call reset(period) first")
        self._command[0] = cmd[0]
        sim, stepper, dt = self._sim, self._stepper, np.float64(self._dt)
        t = np.float64(self._time)
        for _ in range(self._substeps):
            t = stepper.step(sim, t, dt)
        self._time = float(t)
        self._steps_done += 1

    def divergence(self) -> str:
        """Why the current state is unusable (non-finite, beyond reach), or ``""``."""
        p, v = self._rod.position_collection, self._rod.velocity_collection
        if not (np.all(np.isfinite(p)) and np.all(np.isfinite(v))):
            return "non-finite rod state"
        reach = float(np.max(np.linalg.norm(p - p[:, :1], axis=0)))
        if reach > _MAX_REACH * self.geometry.length:
            return f"node {reach:.3f} m from the base, beyond {_MAX_REACH} x the {self.geometry.length} m rod length"
        return ""

    def centerline_world(self) -> np.ndarray:
        """Current node positions, (n_elements + 1, 3) m (a copy)."""
        return self._rod.position_collection.T.copy()

    def _keypoints_world(self, nodes: np.ndarray) -> np.ndarray:
        """Points at the keypoints' rest arc lengths, (..., K, 3) m, from nodes (..., N, 3)."""
        s_nodes = np.arange(nodes.shape[-2]) * self.geometry.element_length
        idx = np.clip(np.searchsorted(s_nodes, self._keypoint_s, side="right") - 1, 0, nodes.shape[-2] - 2)
        f = ((self._keypoint_s - s_nodes[idx]) / self.geometry.element_length)[:, None]
        return nodes[..., idx, :] * (1.0 - f) + nodes[..., idx + 1, :] * f

    def _in_image(self, uv: np.ndarray) -> np.ndarray:
        return (np.all(np.isfinite(uv), axis=-1) & (uv[..., 0] >= 0) & (uv[..., 0] <= self.camera.width - 1)
                & (uv[..., 1] >= 0) & (uv[..., 1] <= self.camera.height - 1))

    def observe(self) -> tuple[np.ndarray, np.ndarray]:
        """Current keypoints ``((K, 2) px, (K,) valid)`` (``SteppableTwin``)."""
        uv, _ = self._view.project(self._keypoints_world(self.centerline_world()))
        valid = self._in_image(uv)
        return np.where(valid[:, None], uv, np.nan), valid

    def render(self, nodes: np.ndarray | None = None) -> np.ndarray:
        """One RGB frame, (H, W, 3) uint8, of the current state (or of ``nodes`` (N, 3) m), without noise."""
        nodes = self.centerline_world() if nodes is None else nodes
        if self._bg is None:
            self._bg = _background(self.appearance, self.camera.width, self.camera.height, self.medium)
        img = self._bg.copy()
        uv, depth = self._view.project(nodes)
        rad_px = self.camera.fx * self.geometry.node_radii() / np.maximum(depth, 1e-6)
        render_tube(img, uv, rad_px, self.appearance.tentacle_rgb)
        self._draw_mount(img)
        return img

    def mount_polygon_px(self) -> np.ndarray:
        """Image outline of the base mount (a 0.04 m tall block above the base), (4, 2) px."""
        rb = self.geometry.base_radius
        box = np.array([[-2.2 * rb, 0.0, 0.0], [2.2 * rb, 0.0, 0.0], [2.2 * rb, 0.0, 0.04], [-2.2 * rb, 0.0, 0.04]])
        return self._view.project(box)[0]

    def _draw_mount(self, img: np.ndarray) -> None:
        import cv2

        uv = self.mount_polygon_px()
        if np.all(np.isfinite(uv)):
            cv2.fillConvexPoly(img, np.rint(uv * 16).astype(np.int32), tuple(int(c) for c in self.appearance.mount_rgb),
                               cv2.LINE_AA, shift=4)

    def _apply_noise(self, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        if self._noise_cfg is None:
            return frames, None
        if self._noise_model is None:
            from .camera_model import SensorNoiseModel

            self._noise_model = SensorNoiseModel.from_config(self._noise_cfg)
        return self._noise_model.apply(frames)

    def rollout(self, excitation: Excitation, *, render: bool = False) -> RolloutResult:
        """Reset to rest and replay ``excitation``; deterministic.

        Args:
            excitation: commands (T, 1) at ``excitation.rate`` Hz (normalised tendon
                command in [-1, 1], applied as a zero-order hold for each period).
            render: also render one RGB frame per command step (with the configured noise).

        Returns:
            :class:`RolloutResult`: keypoints (T, K, 2) px sampled at the end of each
            command period (time ``(k + 1) / rate`` s), frames (T, H, W, 3) uint8 if
            ``render``, ``state`` = ``{"centerline": (T, N, 3) m node positions,
            "keypoints_world": (T, K, 3) m points at the keypoints' arc lengths, "command": (T,)}`` plus ``"frame_dropped": (T,) bool`` when a noise model
            with frame drops rendered the frames.
            On divergence the samples from the failing step on are NaN/invalid and
            ``diverged=True`` with the reason in ``message``.

        Raises:
            TwinError: the excitation's columns do not match :attr:`actuator_names`.
        """
        values = np.asarray(excitation.values, dtype=float)
        if values.shape[1] != 1 or (tuple(excitation.actuator_names) != self.actuator_names
                                    and excitation.actuator_names != ("u0",)):
            raise TwinError(f"tentacle twin: excitation '{excitation.name}' drives {excitation.actuator_names}; "
                            f"expected one column {self.actuator_names}")
        T, period = excitation.num_steps, excitation.period
        n_nodes = self.geometry.n_elements + 1
        nodes = np.full((T, n_nodes, 3), np.nan)
        dt = self.time_step(period)
        per = int(round(period / dt))
        message = self.rollout_limits.substeps_problem(
            T * per, f"dt {dt:.3g} s at youngs_modulus {self._values['youngs_modulus']:.3g} Pa, {per:,} per frame")
        diverged = bool(message)  # refused before a single step: a failed evaluation, not a hang
        if not diverged:
            self.reset(period)
        meter = RolloutMeter(self.rollout_limits)
        for k in range(0 if diverged else T):
            self.step(values[k], period)
            problem = self.divergence()
            if problem:
                diverged = True
                message = (f"simulation diverged at command step {k} (t={(k + 1) * period:.3f} s): {problem}; "
                           f"parameters {self._values}, dt {self._dt:.3g} s")
                break
            nodes[k] = self._rod.position_collection.T
            over = meter.problem(k)
            if over:  # the samples so far are kept, the rollout counts as failed
                diverged, message = True, over
                break
        uv, _ = self._view.project(self._keypoints_world(nodes))
        valid = self._in_image(uv)
        traj = Trajectory(time=(np.arange(T) + 1) / excitation.rate, keypoints=uv, valid=valid,
                          names=self.keypoint_names, source="sim", trial_id=excitation.name,
                          meta={"rig": "tentacle" if self.medium == "air" else "tentacle_water",
                                "parameters": dict(self._values), "physics_timestep": self._dt,
                                "substeps": self._substeps})
        frames = None
        if render:
            frames = np.zeros((T, self.camera.height, self.camera.width, 3), np.uint8)
            for k in range(T):
                if np.all(np.isfinite(nodes[k])):
                    frames[k] = self.render(nodes[k])
        state = {"centerline": nodes, "command": values[:, 0].copy(), "keypoints_world": self._keypoints_world(nodes)}
        if frames is not None:
            frames, dropped = self._apply_noise(frames)
            if dropped is not None:
                state["frame_dropped"] = np.asarray(dropped, dtype=bool)
        return RolloutResult(trajectory=traj, frames=frames, diverged=diverged, message=message, state=state)

    def export_model(self, path: str | Path) -> Path:
        """Write the calibrated model (geometry, medium, parameter values) as YAML; returns the path."""
        import yaml

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"model": "vid2sid_ros.sim.elastica_tentacle.TentacleTwin", "medium": self.medium,
                "geometry": {k: getattr(self.geometry, k) for k in TentacleGeometry.__dataclass_fields__},
                "gravity": self.gravity, "parameters": self.get_parameters()}
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path


# -- rig ----------------------------------------------------------------------------------

def tentacle_tracker_config(twin: TentacleTwin) -> dict[str, Any]:
    """Centreline tracker configuration matching ``twin``'s camera and colours."""
    return {
        "kind": "centerline",
        "num_keypoints": len(twin.keypoint_names),
        "base_px": list(twin.base_px),
        "length_px": twin.length_px,
        "base_radius_px": twin.camera.fx * twin.geometry.base_radius / float(twin._view.project(np.zeros(3))[1]),
        "segmentation": {"method": "color", "hsv_lower": [0, 110, 60], "hsv_upper": [28, 255, 255]},
        "occluders": [np.round(twin.mount_polygon_px(), 2).tolist()],
    }


_TWIN_KEYS = ("parameters", "medium", "geometry", "gravity", "width", "height", "camera", "num_keypoints",
              "dt_safety", "appearance")


def default_config() -> dict[str, Any]:
    """Default configuration of the ``tentacle`` rig (in air); a fresh, mutable dict.

    Keys: ``parameters`` (spec path), ``medium``, ``geometry`` (m; measured),
    ``gravity`` (m/s^2), ``width``, ``height`` (px), ``camera`` (see :class:`TentacleTwin`),
    ``num_keypoints``, ``dt_safety``, ``appearance``, ``excitations`` (``{"train": [...],
    "holdout": [...]}``; normalised tendon command in [-1, 1], 30 Hz), ``tracker``
    (``None`` = derived from the camera, see :func:`tentacle_tracker_config`), ``noise``
    (``SensorNoiseModel`` keyword arguments of the stand-in "real" camera in sim2sim runs;
    the twin's own frames are clean unless ``make_twin(noise=...)``).
    """
    return {
        "parameters": str(PARAMETERS_PATH),
        "medium": "air",
        "geometry": {"length": 0.2, "base_radius": 0.012, "tip_radius": 0.005, "n_elements": 20},
        "gravity": 9.81,
        "width": 320,
        "height": 240,
        "camera": {"fx": 420.0, "fy": 420.0, "cx": 159.5, "cy": 119.5, "reference_size": [320, 240],
                   "position": [0.0, -0.6, -0.1], "look_at": [0.0, 0.0, -0.1], "up": [0.0, 0.0, 1.0]},
        "num_keypoints": 10,
        "dt_safety": 0.5,
        "appearance": {"background": "plain"},
        "excitations": {
            # training: a held step with release (static curl -> gain / E; free ringing after
            # release -> E / rho and damping) and a chirp through the first bending modes
            "train": [
                {"kind": "step", "name": "train_step", "amplitude": 0.8, "t_step": 0.1, "t_release": 1.2,
                 "duration": 2.5, "rate": 30.0},
                {"kind": "chirp", "name": "train_chirp", "amplitude": 0.6, "f0": 0.3, "f1": 3.0,
                 "duration": 2.5, "rate": 30.0},
            ],
            # holdout: controls never used for fitting
            "holdout": [
                {"kind": "multisine", "name": "holdout_multisine", "amplitude": 0.7,
                 "frequencies": [0.5, 1.3, 2.4], "seed": 3, "duration": 2.5, "rate": 30.0},
                {"kind": "sine", "name": "holdout_sine", "amplitude": 0.5, "frequency": 1.0, "duration": 2.0,
                 "rate": 30.0},
            ],
        },
        "tracker": None,
        # the stand-in "real" camera of sim2sim runs (the twin itself renders clean frames)
        "noise": {"gaussian_sigma": 2.0, "poisson": 4000.0, "blur_px": 0.6, "motion_blur": 0.3,
                  "gamma": 1.0, "exposure": 1.0, "drop_prob": 0.01, "seed": 0},
    }


def default_water_config() -> dict[str, Any]:
    """Default configuration of the ``tentacle_water`` rig (same tentacle, in a water tank)."""
    cfg = default_config()
    cfg["parameters"] = str(WATER_PARAMETERS_PATH)
    cfg["medium"] = "water"
    cfg["appearance"] = {"background": "water"}
    cfg["excitations"] = {
        # larger, faster commands: drag grows with speed squared, added mass with acceleration
        "train": [
            {"kind": "step", "name": "train_step", "amplitude": 1.0, "t_step": 0.1, "t_release": 1.3,
             "duration": 2.5, "rate": 30.0},
            {"kind": "chirp", "name": "train_chirp", "amplitude": 0.9, "f0": 0.4, "f1": 3.0, "duration": 2.5,
             "rate": 30.0},
        ],
        "holdout": [
            {"kind": "multisine", "name": "holdout_multisine", "amplitude": 0.9, "frequencies": [0.5, 1.3, 2.4],
             "seed": 3, "duration": 2.5, "rate": 30.0},
        ],
    }
    return cfg


_DESCRIPTION_AIR = (
    "A soft silicone tentacle (Cosserat rod, 0.2 m long, radius tapering from 12 mm at the base to 5 mm at the tip) "
    "hangs straight down from a dark mount at the top of the image, in air, filmed from the front. A tendon "
    "curls it sideways: positive command bends it toward image right, negative toward the left, more strongly "
    "toward the thin tip. Keypoints c0..c9 are points on its centreline at 10 %, 20 %, ..., 100 % of its length "
    "(c9 = tip), in pixels. Commands are the normalised tendon tension in [-1, 1]. Higher Young's modulus: "
    "smaller curl for the same command and faster swinging; more damping: less overshoot and quicker decay after "
    "the release; more actuation gain: larger curl for the same command. Density is measured (only E/density and "
    "gain/density are visible).")

_DESCRIPTION_WATER = (
    "The same soft tentacle (0.2 m, radius 12 mm to 5 mm) hanging in a water tank, filmed from the front through "
    "the glass. Its material (Young's modulus, damping, actuation gain, density) is known from the air "
    "calibration and the water density is measured; only the water's effect is calibrated: the normal drag "
    "coefficient (resists sideways motion, grows with speed squared: smaller, slower swings, no overshoot) and the "
    "added-mass coefficient (water carried along as extra inertia: slower oscillation, later response). Skin "
    "friction along the body (tangential drag) is frozen: it barely moves a clamped tentacle. Buoyancy almost "
    "cancels gravity. Keypoints c0..c9 are centreline points at 10 %..100 % of the length; commands are the "
    "normalised tendon tension in [-1, 1].")


def _build_rig(name: str, cfg: dict[str, Any], description: str):
    from .registry import Rig

    parameters = load_parameter_set(cfg["parameters"])

    def make_twin(**kw: Any) -> TentacleTwin:
        valid = _TWIN_KEYS + ("noise",)
        bad = [k for k in kw if k not in valid]
        if bad:
            raise TwinError(f"{name} make_twin: unknown argument(s) {bad}; valid: {', '.join(valid)}")
        args: dict[str, Any] = {k: copy.deepcopy(cfg[k]) for k in _TWIN_KEYS}
        args["parameters"] = parameters
        args.update(kw)
        return TentacleTwin(**args)

    probe = make_twin()
    tracker = cfg["tracker"] if cfg["tracker"] is not None else probe.tracker_config()
    cfg = {**cfg, "tracker": tracker}
    excitations = build_excitation_sets(cfg["excitations"], actuator_names=TentacleTwin.actuator_names)
    return Rig(name=name, description=description, parameters=parameters, excitations=excitations,
               make_twin=make_twin, tracker=tracker, config=cfg)


def _merged(cfg: dict[str, Any], overrides: Mapping[str, Any], rig: str) -> dict[str, Any]:
    unknown = [k for k in overrides if k not in cfg]
    if unknown:
        raise TwinError(f"{rig} rig: unknown config key(s) {unknown}; valid keys: {', '.join(cfg)}")
    for k, v in overrides.items():
        v = copy.deepcopy(v)
        # geometry, camera and appearance merge field by field; everything else is replaced whole
        if k in ("geometry", "camera", "appearance") and isinstance(v, Mapping) and isinstance(cfg[k], dict):
            cfg[k] = {**cfg[k], **v}
        else:
            cfg[k] = v
    return cfg


def make_rig(**overrides: Any):
    """Build the ``tentacle`` :class:`~vid2sid_ros.sim.registry.Rig` (in air).

    Args:
        overrides: keys of :func:`default_config`; ``geometry``, ``camera`` and
            ``appearance`` are merged field by field, other keys replaced whole
            (e.g. ``parameters=ALLFREE_PARAMETERS_PATH`` for the unidentifiable spec).

    Raises:
        TwinError: on an unknown key or bad geometry/camera.
        ParameterSpecError, ExcitationError: on a malformed spec or excitation.
    """
    return _build_rig("tentacle", _merged(default_config(), overrides, "tentacle"), _DESCRIPTION_AIR)


def make_water_rig(**overrides: Any):
    """Build the ``tentacle_water`` rig: only environment parameters are free (normal drag, added mass).

    Args:
        overrides: keys of :func:`default_water_config` (as for :func:`make_rig`).
    """
    return _build_rig("tentacle_water", _merged(default_water_config(), overrides, "tentacle_water"),
                      _DESCRIPTION_WATER)
