"""Headless offscreen rendering of a MuJoCo fixed camera (EGL, OSMesa fallback).

A small, fast replacement for ``mujoco.Renderer`` tuned for system identification:
one fixed camera, RGB only, shadows / reflections / skybox off (multisampling is set
by the model's ``<quality offsamples>``), frames written straight into a caller's
array. The OpenGL backend follows ``MUJOCO_GL`` (default ``egl``); if it cannot
create a context, the others (``egl``, ``osmesa``) are tried in turn and the error
lists every attempt.

Also holds the pinhole model of a MuJoCo camera (:func:`camera_intrinsics`,
:func:`project_points`) so the ground-truth keypoints and the rendered pixels use
one convention: **pixel centres at integer coordinates** (OpenCV), x = column to the
right, y = row downwards; the top-left pixel's centre is (0, 0).
"""

from __future__ import annotations

import math
import os
import threading
import weakref

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402  (MUJOCO_GL must be set before the import)
import numpy as np  # noqa: E402

from .mujoco_log import install as _route_mujoco_warnings  # noqa: E402

from ..core.camera import moved_pose  # noqa: E402
from .base import CameraIntrinsics, TwinError  # noqa: E402

__all__ = ["OffscreenRenderer", "camera_intrinsics", "camera_extrinsics", "project_points", "gl_backend",
           "default_maxgeom",
           "move_camera", "preview_size"]

_route_mujoco_warnings()  # MuJoCo's warnings go to logging, not to a MUJOCO_LOG.TXT beside the user's files

#: MuJoCo camera axes (x right, y up, looking along -z) <-> the optical frame (x right, y down, z forward)
_MJ_FROM_OPTICAL = np.diag([1.0, -1.0, -1.0])

_BACKEND_IN_USE: str | None = None
#: per thread, a weak reference to the renderer whose GL context is current (make_current is then a no-op)
_CURRENT = threading.local()


#: GL resources of renderers, by token: (GL context, MjrContext, owner thread ident). Held here, not only
#: by the renderer, so the cyclic garbage collector never finalizes them on its own (in any order, in the
#: middle of another renderer's frame); a collected renderer only queues its token, freed at the next safe
#: point on the thread that made it (a context is bound to one thread at a time).
_LIVE: dict[int, tuple[object, object, int]] = {}
_PENDING: list[int] = []
_PENDING_LOCK = threading.Lock()
#: resources that cannot be freed safely (their thread ended with the context bound): kept, never destroyed,
#: because ``mjr_freeContext`` run with another context current deletes *that* context's GL objects
_LEAKED: list[tuple[object, object]] = []
_TOKENS = iter(range(1, 1 << 62))


def _current_renderer() -> "OffscreenRenderer | None":
    ref = getattr(_CURRENT, "renderer", None)
    return ref() if ref is not None else None


def _queue_release(token: int) -> None:
    """Finalizer of a collected renderer: queue its GL resources (no GL call: it may run inside a
    garbage collection triggered while another renderer's context is current mid-frame)."""
    with _PENDING_LOCK:
        _PENDING.append(token)


def _release(token: int) -> None:
    """Free one renderer's GL resources on the calling thread: its MjrContext with its own GL context
    current, then the context. ``mjr_freeContext`` deletes GL object names in whatever context is
    current, so freeing with another renderer's context current would delete *that* renderer's
    framebuffers; when the context cannot be bound here, both are kept (:data:`_LEAKED`)."""
    entry = _LIVE.pop(token, None)
    if entry is None:
        return
    ctx, con, _owner = entry
    _CURRENT.renderer = None  # this thread's binding changes: the next render binds its own context
    try:
        ctx.make_current()
    except Exception:  # noqa: BLE001 - bound elsewhere: freeing now would hit another context
        _LEAKED.append((ctx, con))
        return
    con.free()
    ctx.free()


def _drain_pending() -> None:
    """Free the GL resources of this thread's renderers collected since the last call (a safe point:
    no frame in progress on this thread). Renderers of threads that have ended are kept, not freed
    (:data:`_LEAKED`); those of other live threads wait for their thread. Called before a renderer
    binds its context or a new one is made."""
    if not _PENDING:
        return
    me = threading.get_ident()
    alive = {t.ident for t in threading.enumerate()}
    with _PENDING_LOCK:
        mine = [t for t in _PENDING if t in _LIVE and _LIVE[t][2] == me]
        dead = [t for t in _PENDING if t in _LIVE and _LIVE[t][2] not in alive]
        _PENDING[:] = [t for t in _PENDING if t in _LIVE and t not in mine and t not in dead]
    for token in dead:
        ctx, con, _owner = _LIVE.pop(token)
        _LEAKED.append((ctx, con))
    for token in mine:
        _release(token)


def default_maxgeom(model: mujoco.MjModel) -> int:
    """Size of the scene's geom buffer (``MjvScene(maxgeom=)``) for ``model``: room for every geom,
    site and body frame four times over (decorations, contact points), 32 segments per tendon, and
    100 spare. A rig config's ``render.maxgeom`` overrides it when MuJoCo still warns
    "Pre-allocated visual geom buffer is full".
    """
    return 4 * (model.ngeom + model.nsite + model.nbody) + 32 * model.ntendon + 100


def gl_backend() -> str | None:
    """The OpenGL backend of this process's offscreen contexts (``"egl"``, ``"osmesa"`` or ``"glfw"``).

    Returns:
        The backend the last :class:`OffscreenRenderer` context was created with, or ``None``
        before any renderer has made a context in this process (``MUJOCO_GL`` then only says
        which backend will be tried first).
    """
    return _BACKEND_IN_USE


def _make_gl_context(width: int, height: int):
    """Create and bind an offscreen GL context, trying MUJOCO_GL first, then egl, osmesa.

    Raises:
        TwinError: listing each backend tried and why it failed.
    """
    global _BACKEND_IN_USE
    wanted = os.environ.get("MUJOCO_GL", "egl").strip().lower() or "egl"
    order = [wanted] + [b for b in ("egl", "osmesa") if b != wanted]
    errors = []
    for backend in order:
        try:
            if backend == "egl":
                from mujoco.egl import GLContext
            elif backend == "osmesa":
                # PyOpenGL picks its platform once per process from this variable.
                if os.environ.get("PYOPENGL_PLATFORM", "osmesa") != "osmesa":
                    raise RuntimeError("PyOpenGL was already bound to platform "
                                       f"{os.environ['PYOPENGL_PLATFORM']!r} in this process")
                os.environ["PYOPENGL_PLATFORM"] = "osmesa"
                from mujoco.osmesa import GLContext
            elif backend == "glfw":
                from mujoco.glfw import GLContext
            else:
                raise RuntimeError(f"unsupported MUJOCO_GL value {backend!r}")
            ctx = GLContext(width, height)
            ctx.make_current()
            _BACKEND_IN_USE = backend
            return ctx
        except Exception as err:  # noqa: BLE001 - report every backend's failure together
            errors.append(f"{backend}: {type(err).__name__}: {err}")
    raise TwinError("cannot create a headless OpenGL context (set MUJOCO_GL=egl or osmesa and "
                    "install libEGL or libOSMesa); tried " + "; ".join(errors))


def camera_intrinsics(model: mujoco.MjModel, camera_id: int, width: int, height: int) -> CameraIntrinsics:
    """Pinhole intrinsics of a MuJoCo camera rendered at ``width`` x ``height`` px.

    MuJoCo's ``fovy`` is the vertical field of view and pixels are square, so
    ``fy = fx = (height / 2) / tan(fovy / 2)``. The principal point is the image
    centre in the pixel-centre convention: ``cx = (width - 1) / 2``,
    ``cy = (height - 1) / 2``.

    Raises:
        TwinError: if the camera uses MuJoCo's explicit ``sensorsize``/``focal``
            intrinsics, which this function does not model.
    """
    if np.any(model.cam_sensorsize[camera_id] > 0):
        raise TwinError("camera uses sensorsize/focal intrinsics; only fovy cameras are supported")
    fovy = math.radians(float(model.cam_fovy[camera_id]))
    f = 0.5 * height / math.tan(0.5 * fovy)
    # no int() here: CameraIntrinsics refuses a size that is not an integer (was: 64.5 px silently 64)
    return CameraIntrinsics(width=width, height=height, fx=f, fy=f,
                            cx=0.5 * (width - 1), cy=0.5 * (height - 1))


def camera_extrinsics(data: mujoco.MjData, camera_id: int) -> tuple[np.ndarray, np.ndarray]:
    """World pose of a camera after ``mj_forward``: ``(position (3,) m, rotation (3, 3))``.

    The rotation's columns are the camera axes in world coordinates (MuJoCo: x right,
    y up, the camera looks along -z).
    """
    return data.cam_xpos[camera_id].copy(), data.cam_xmat[camera_id].reshape(3, 3).copy()


def move_camera(model: mujoco.MjModel, camera_id: int, translation: np.ndarray, rotation_vector: np.ndarray) -> None:
    """Move MuJoCo camera ``camera_id`` in its own optical frame, in place (``cam_pos``, ``cam_quat``).

    The move is applied in the camera's local frame (relative to its parent body), so it is the
    same move in the world whatever the parent (:func:`~vid2sid_ros.core.camera.moved_pose`).
    Rendering and :func:`camera_extrinsics` see it after the next ``mj_forward``/``mj_kinematics``.

    Args:
        translation: (3,) m along the optical axes (x right, y down, z forward).
        rotation_vector: (3,) rad about the optical axes (axis × angle).

    Raises:
        TwinError: ``camera_id`` out of range. CameraError: vectors that are not 3 finite numbers.
    """
    if not 0 <= int(camera_id) < model.ncam:
        raise TwinError(f"camera id {camera_id} out of range (the model has {model.ncam} camera(s))")
    local = np.zeros(9)
    mujoco.mju_quat2Mat(local, np.asarray(model.cam_quat[camera_id], float))
    pos, rot = moved_pose(model.cam_pos[camera_id], local.reshape(3, 3) @ _MJ_FROM_OPTICAL,
                          translation, rotation_vector)
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, (rot @ _MJ_FROM_OPTICAL).ravel())
    model.cam_pos[camera_id] = pos
    model.cam_quat[camera_id] = quat


def project_points(points_world: np.ndarray, cam_pos: np.ndarray, cam_rot: np.ndarray,
                   intr: CameraIntrinsics) -> np.ndarray:
    """Project world points to pixels.

    Args:
        points_world: shape (..., 3), m.
        cam_pos, cam_rot: from :func:`camera_extrinsics`.
        intr: the camera's intrinsics.

    Returns:
        Pixel coordinates, shape (..., 2): ``u = cx + fx * X / D``,
        ``v = cy - fy * Y / D`` with ``(X, Y, -D)`` the point in camera coordinates.
        Points behind the camera (D <= 0) give NaN.
    """
    p = np.asarray(points_world, dtype=float)
    pc = (p - cam_pos) @ cam_rot  # (..., 3) camera coordinates
    depth = -pc[..., 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        u = intr.cx + intr.fx * pc[..., 0] / depth
        v = intr.cy - intr.fy * pc[..., 1] / depth
    out = np.stack([u, v], axis=-1)
    out[depth <= 0] = np.nan
    return out


def preview_size(width: int, height: int, preview_width: int | None) -> tuple[int, int]:
    """``(w, h)`` px of a ``preview_width``-wide image of a ``width`` x ``height`` camera: the aspect
    kept, the height even (at least 2); the full size when ``preview_width`` is None or not smaller."""
    if preview_width is None or int(preview_width) >= width:
        return int(width), int(height)
    w = max(1, int(preview_width))
    return w, max(2, int(round(height * w / width)) // 2 * 2)


#: bound on the multisampled offscreen buffer, pixels x samples: a camera larger than 2560 x 1440 px renders
#: with fewer than the model's ``offsamples`` (a 3840 x 2160 camera with 4 samples held about 400 MB of GL
#: buffers; with 1 about 130 MB). Smaller cameras render as the model says.
MAX_SAMPLED_PIXELS = 16_000_000


class OffscreenRenderer:
    """Render one fixed camera of a model into RGB arrays.

    Args:
        model: the compiled model (its ``<visual><global offwidth/offheight>`` must be
            at least ``width`` x ``height``).
        width, height: image size, px.
        camera: camera name or id.
        maxgeom: scene geom buffer size (None: :func:`default_maxgeom`).

    Raises:
        TwinError: unknown camera, image larger than the offscreen buffer, or no
            OpenGL backend.
    """

    def __init__(self, model: mujoco.MjModel, width: int, height: int, camera: str | int = 0,
                 maxgeom: int | None = None) -> None:
        self._ctx = None
        self._con = None
        if isinstance(camera, str):
            cam_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
            if cam_id < 0:
                raise TwinError(f"camera {camera!r} not found in the model")
        else:
            cam_id = int(camera)
            if not 0 <= cam_id < model.ncam:
                raise TwinError(f"camera id {cam_id} out of range [0, {model.ncam})")
        if width > model.vis.global_.offwidth or height > model.vis.global_.offheight:
            raise TwinError(f"image {width}x{height} px exceeds the model's offscreen buffer "
                            f"{model.vis.global_.offwidth}x{model.vis.global_.offheight}; raise "
                            "<visual><global offwidth=... offheight=...> in the model")
        self.model = model
        self.width, self.height = int(width), int(height)
        q = model.vis.quality
        if q.offsamples * self.width * self.height > MAX_SAMPLED_PIXELS:  # a very large camera: fewer samples
            q.offsamples = MAX_SAMPLED_PIXELS // (self.width * self.height)
        _drain_pending()
        ctx = _make_gl_context(self.width, self.height)
        g = model.vis.global_
        declared = (g.offwidth, g.offheight)
        # MjrContext sizes its offscreen buffers by the model's offwidth x offheight: a thumbnail renderer of
        # a 3840 x 2160 camera would hold the full-size multisampled buffers (about 600 MB) it never uses
        g.offwidth, g.offheight = self.width, self.height
        try:
            con = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_100.value)
        except Exception:
            ctx.free()
            _CURRENT.renderer = None
            raise
        finally:
            g.offwidth, g.offheight = declared
        self._ctx, self._con = ctx, con
        _CURRENT.renderer = weakref.ref(self)
        self._token = next(_TOKENS)
        _LIVE[self._token] = (self._ctx, self._con, threading.get_ident())
        self._finalizer = weakref.finalize(self, _queue_release, self._token)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, self._con)
        self._scene = mujoco.MjvScene(model, maxgeom=int(maxgeom) if maxgeom else default_maxgeom(model))
        for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION,
                     mujoco.mjtRndFlag.mjRND_SKYBOX, mujoco.mjtRndFlag.mjRND_FOG):
            self._scene.flags[flag] = 0
        self._option = mujoco.MjvOption()
        self._camera = mujoco.MjvCamera()
        self._camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
        self._camera.fixedcamid = cam_id
        self._rect = mujoco.MjrRect(0, 0, self.width, self.height)
        self._buffer = np.empty((self.height, self.width, 3), dtype=np.uint8)

    def make_current(self) -> None:
        """Bind this renderer's GL context to the calling thread (free when it already is).

        Contexts made current by other code (e.g. ``mujoco.Renderer``) are not seen:
        call :meth:`release` after using one on a thread that also renders here.
        """
        if self._ctx is None:
            raise TwinError("renderer is closed")
        _drain_pending()
        if _current_renderer() is not self:
            self._ctx.make_current()
            _CURRENT.renderer = weakref.ref(self)

    @staticmethod
    def release() -> None:
        """Forget which context is current on this thread (the next render binds its own)."""
        _CURRENT.renderer = None

    def render(self, data: mujoco.MjData, out: np.ndarray | None = None, *,
               size: tuple[int, int] | None = None) -> np.ndarray:
        """Render the current state of ``data``.

        Args:
            data: simulation state (kinematics must be up to date, as after ``mj_step``).
            out: optional destination, shape (H, W, 3) uint8.
            size: ``(w, h)`` px, at most this renderer's size: render a smaller image of the same
                view (a viewport of that size; the camera's aspect ratio should be kept), e.g. a
                report's thumbnail without rendering, then shrinking, the full image.

        Returns:
            RGB image, shape (H, W, 3) uint8 (or (h, w, 3)), row 0 at the top.

        Raises:
            TwinError: a closed renderer, or ``size`` larger than the renderer.
        """
        if self._con is None:
            raise TwinError("renderer is closed")
        rect, buf = self._rect, self._buffer
        if size is not None and tuple(size) != (self.width, self.height):
            w, h = int(size[0]), int(size[1])
            if not (0 < w <= self.width and 0 < h <= self.height):
                raise TwinError(f"render size {w}x{h} px is outside the renderer's {self.width}x{self.height}")
            rect, buf = mujoco.MjrRect(0, 0, w, h), np.empty((h, w, 3), dtype=np.uint8)
        self.make_current()
        mujoco.mjv_updateScene(self.model, data, self._option, None, self._camera,
                               mujoco.mjtCatBit.mjCAT_ALL.value, self._scene)
        mujoco.mjr_render(rect, self._scene, self._con)
        mujoco.mjr_readPixels(buf, None, rect, self._con)
        if out is None:
            out = np.empty_like(buf)
        np.copyto(out, buf[::-1])  # OpenGL rows run bottom-up
        return out

    def close(self) -> None:
        """Free the GL resources now (idempotent; a renderer that is only dropped is freed at the next
        safe point: another renderer's next frame or construction)."""
        if self._con is None and self._ctx is None:
            return
        self._finalizer.detach()
        self._con = self._ctx = None
        _release(self._token)
