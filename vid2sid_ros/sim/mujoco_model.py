"""Load a user's robot (MJCF or URDF) through MuJoCo and dress it for calibration.

:func:`build_model` compiles the model of a rig config (``model:``) with :class:`mujoco.MjSpec`
and adds, without touching the user's file:

* **markers** (``markers:``): small coloured spheres (``contype``/``conaffinity`` 0, massless,
  flat-shaded) on a site or body, for the colour tracker; each also gets a site of the same
  name, so a keypoint may name the marker;
* **actuators** (``actuators:`` entries that are mappings): ``motor`` / ``position`` /
  ``velocity`` actuators on named joints (URDF has no MuJoCo actuators);
* **the camera** (``camera:``): a world-fixed MuJoCo camera with the intrinsics of
  :class:`~vid2sid_ros.core.camera.PinholeCamera` (``sensorsize`` = ``resolution`` = image
  size in px, ``focalpixel`` = (fx, fy), ``principalpixel`` = ((W-1)/2 - cx, (H-1)/2 - cy), so that
  MuJoCo's render and ``PinholeCamera.project`` put a point on the same pixel (checked by
  ``test/test_mujoco_model.py``); lens distortion is applied to the render afterwards by
  :func:`distortion_maps` + ``cv2.remap``.

URDF: MuJoCo's own URDF import (``<mujoco><compiler .../></mujoco>`` extension honoured).
Unless that extension says otherwise, visual geometry is kept (``discardvisual="false"``: the
twin is rendered), links on fixed joints are not fused (``fusestatic="false"``: their names stay
usable as keypoints), and mesh paths are resolved relative to the URDF file (``package://NAME/``
against a directory ``NAME`` beside or above the file; ``file://`` as a path).

Errors are :class:`ModelError` with one line naming the file (and config key) and MuJoCo's
own message for a model it cannot compile.
"""

from __future__ import annotations

import copy
import difflib
import math
import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from ..core.camera import PinholeCamera  # noqa: E402
from .base import TwinError  # noqa: E402

__all__ = ["ModelError", "MarkerSpec", "ActuatorSpec", "BuiltModel", "load_spec", "build_model", "set_camera",
           "is_urdf_text",
           "compiled_model_xml", "parse_markers", "parse_actuators", "distortion_maps", "rendered_colours", "CAMERA_NAME"]

#: name of the camera added to the model
CAMERA_NAME = "vid2sid_camera"
_MARKER_KEYS = ("name", "site", "body", "rgba", "radius", "pos")
_ACTUATOR_KEYS = ("name", "joint", "kind", "gear", "kp", "kv", "ctrlrange", "forcerange")
_ACTUATOR_KINDS = ("motor", "position", "velocity")


class ModelError(TwinError):
    """A user model (file, URDF, marker, actuator, camera) is malformed; the message names file and key."""


@dataclass(frozen=True)
class MarkerSpec:
    """A coloured sphere added to the model for the tracker.

    Attributes:
        name: marker name (also the name of the site added at its centre).
        parent: ``("site", name)`` or ``("body", name)`` it is attached to.
        rgba: colour, 4 values in [0, 1].
        radius: sphere radius, m (> 0).
        pos: offset from the parent's frame origin in the parent's frame, (3,) m.
        where: ``file:markers[i]`` for messages.
    """

    name: str
    parent: tuple[str, str]
    rgba: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 1.0)
    radius: float = 0.01
    pos: tuple[float, float, float] = (0.0, 0.0, 0.0)
    where: str = "markers"


@dataclass(frozen=True)
class ActuatorSpec:
    """An actuator added to the model (``kind``: motor | position | velocity).

    Attributes:
        name: actuator name (excitation column). joint: the joint it drives.
        gear: transmission gear (motor torque per unit command, N*m or N per unit).
        kp: position gain (position actuators), N*m/rad. kv: velocity gain, N*m*s/rad.
        ctrlrange: (lo, hi) command limits or None. forcerange: (lo, hi) or None.
    """

    name: str
    joint: str
    kind: str = "motor"
    gear: float = 1.0
    kp: float = 10.0
    kv: float = 1.0
    ctrlrange: tuple[float, float] | None = None
    forcerange: tuple[float, float] | None = None
    where: str = "actuators"


@dataclass
class BuiltModel:
    """A compiled user model.

    A deep copy has its own copy of the spec (``MjSpec.copy``). MuJoCo's MjSpec does not pickle:
    a pickled copy (a Ray actor's) has ``spec`` None, and a twin that needs the spec there builds
    it again from its model file (:class:`~vid2sid_ros.sim.user_model.UserModelTwin`).

    Attributes:
        spec: the MjSpec (user model + markers + actuators + camera), for export and the batch
            sensor model; None in an unpickled copy.
        model: the compiled MjModel.
        path: the model file (None for a ``robot_description`` string).
        camera_id: id of :data:`CAMERA_NAME` (-1 when no camera was added).
        source: text naming the model for messages.
        timestep: the model file's own ``<option timestep>``, s, or None when the file sets
            none (MuJoCo's default 0.002 s is then not the author's choice); an ``<include>``-d
            file's option is not read.
    """

    spec: mujoco.MjSpec | None
    model: mujoco.MjModel
    path: Path | None
    camera_id: int
    source: str
    timestep: float | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the spec (an MjSpec cannot be pickled): ``spec`` is None in the copy."""
        return {**self.__dict__, "spec": None}

    def __deepcopy__(self, memo: dict[int, Any]) -> "BuiltModel":
        """A deep copy with a copy of the spec (``MjSpec.copy``; one already in ``memo`` is used)."""
        if self.spec is not None and id(self.spec) not in memo:
            memo[id(self.spec)] = self.spec.copy()
        new = object.__new__(type(self))
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            setattr(new, k, copy.deepcopy(v, memo))
        return new


def declared_timestep(text: str) -> float | None:
    """The ``timestep`` of an MJCF ``<mujoco><option>`` or a URDF ``<robot><mujoco><option>``, s; None if absent
    or not a positive number (MuJoCo reports a malformed one when it loads the model)."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return None
    opt = root.find("option") if root.tag == "mujoco" else root.find("mujoco/option")
    try:
        v = float(opt.get("timestep")) if opt is not None and opt.get("timestep") is not None else None
    except ValueError:
        return None
    return v if v is not None and math.isfinite(v) and v > 0 else None


# -- reading ---------------------------------------------------------------------
def is_urdf_text(text: str) -> bool:
    """True when the document's root element is ``<robot>`` (URDF). The XML declaration, a DOCTYPE and comments
    before the root are skipped: a comment that mentions ``<mujoco>`` or ``<robot>`` decides nothing."""
    body = re.sub(r"<!--.*?-->", "", text[:65536], flags=re.S)
    root = re.search(r"<\s*([A-Za-z_][\w:.-]*)", body)  # the first element (not <?xml ...?> nor <!DOCTYPE>)
    return root is not None and root.group(1) == "robot"


def _resolve_uri(uri: str, base: Path) -> str:
    """Mesh ``filename`` of a URDF -> absolute path (package://, file://, relative)."""
    if uri.startswith("file://"):
        p = Path(uri[len("file://"):])
        return str(p if p.is_absolute() else (base / p).resolve())
    if uri.startswith("package://"):
        pkg, _, rest = uri[len("package://"):].partition("/")
        for d in [base, *base.parents]:
            if d.name == pkg and (d / rest).exists():
                return str((d / rest).resolve())
            if (d / pkg / rest).exists():
                return str((d / pkg / rest).resolve())
        return str((base / rest).resolve())  # best effort; MuJoCo names the missing file
    p = Path(uri)
    return str(p if p.is_absolute() else (base / p).resolve())


#: MJCF elements whose ``file`` attribute names an asset (MuJoCo XML reference, "asset")
_MJCF_FILE_TAGS = {"mesh": "meshdir", "skin": "meshdir", "hfield": "assetdir", "texture": "texturedir"}
_TEXTURE_SIDES = ("fileright", "fileleft", "fileup", "filedown", "filefront", "fileback")
#: most files a model may name (includes and assets); a bound on the work of the checks
MAX_MODEL_FILES = 10_000


def _read_model_text(path: Path, what: str) -> str:
    """A model file's text, read only if it is a regular file within the size bound (never blocks)."""
    from ..core.files import read_regular_file

    try:
        return read_regular_file(path, what=what).decode("utf-8")
    except UnicodeDecodeError as err:
        raise ModelError(f"{path}: {what} is not UTF-8 text ({err})") from None
    except OSError as err:
        raise ModelError(f"{path}: cannot read {what}: {err.strerror or err}") from None


def model_files(path: str | Path, *, text: str | None = None) -> list[Path]:
    """Every file a model reads: the model, its MJCF ``<include>`` files (recursively) and the
    assets they name (meshes, skins, height fields, textures; URDF mesh filenames).

    Each is checked to be a regular file within the size bound before anything else reads it
    (:func:`vid2sid_ros.core.files.check_regular_file`: a FIFO, device or socket is refused at
    once instead of blocking MuJoCo's ``open()``). Asset paths resolve as MuJoCo resolves them:
    against the compiler's ``meshdir``/``texturedir``/``assetdir``, relative to the main model's
    folder. An asset that does not exist is left for MuJoCo to name.

    Args:
        path: the main MJCF/URDF file. text: its text when already read.

    Returns:
        Paths, the model first, in document order, without duplicates.

    Raises:
        ModelError: a named file that is not a regular file, too large, unreadable, not XML,
            an include cycle, or more than :data:`MAX_MODEL_FILES` files.
    """
    from ..core.files import NotARegularFileError, check_regular_file

    main = Path(path)
    base = main.parent
    out: list[Path] = []
    seen: set[Path] = set()
    dirs = {"meshdir": base, "texturedir": base, "assetdir": base}

    def add(p: Path, what: str) -> bool:
        if p in seen:
            return False
        if len(seen) >= MAX_MODEL_FILES:
            raise ModelError(f"{main}: the model names more than {MAX_MODEL_FILES} files")
        seen.add(p)
        if not p.exists():
            return False  # MuJoCo names the missing file
        try:
            check_regular_file(p, what=what)
        except NotARegularFileError as err:
            raise ModelError(str(err)) from None
        except OSError as err:
            raise ModelError(f"{p}: cannot read {what}: {err.strerror or err}") from None
        out.append(p)
        return True

    def walk(p: Path, body: str | None, stack: tuple[Path, ...]) -> None:
        if body is None:
            if not add(p, "a file the model includes" if stack else "the model file"):
                return
            body = _read_model_text(p, "a file the model includes" if stack else "the model file")
        else:
            add(p, "the model file")
        try:
            root = ET.fromstring(body)
        except ET.ParseError as err:
            raise ModelError(f"{p}: not valid XML: {err}") from None
        if root.tag == "robot":  # URDF: mesh filenames (package://, file://, relative to the URDF)
            for mesh in root.iter("mesh"):
                if mesh.get("filename"):
                    add(Path(_resolve_uri(mesh.get("filename"), p.parent)), "a mesh the model names")
            for comp in root.iter("compiler"):
                if comp.get("meshdir"):
                    md = Path(comp.get("meshdir"))
                    dirs["meshdir"] = md if md.is_absolute() else base / md
            return
        for el in root.iter():
            if el.tag == "compiler":
                for k in ("meshdir", "texturedir", "assetdir"):
                    if el.get(k):
                        d = Path(el.get(k))
                        dirs[k] = d if d.is_absolute() else base / d
                if el.get("assetdir"):
                    for k in ("meshdir", "texturedir"):
                        if not el.get(k):
                            dirs[k] = dirs["assetdir"]
            elif el.tag == "include" and el.get("file"):
                inc = Path(el.get("file"))
                inc = inc if inc.is_absolute() else base / inc
                if inc in stack:
                    raise ModelError(f"{p}: <include file={el.get('file')!r}> includes itself (a cycle)")
                walk(inc, None, stack + (p,))
            elif el.tag in _MJCF_FILE_TAGS:
                for attr in ("file", *(_TEXTURE_SIDES if el.tag == "texture" else ())):
                    if el.get(attr):
                        f = Path(el.get(attr))
                        add(f if f.is_absolute() else dirs[_MJCF_FILE_TAGS[el.tag]] / f,
                            f"a {el.tag} file the model names")

    walk(main, text, ())
    return out


def _prepare_urdf(text: str, base: Path, where: str) -> str:
    """Absolute mesh paths + compiler defaults for rendering (see module docstring)."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as err:
        raise ModelError(f"{where}: not valid URDF XML: {err}") from None
    if root.tag != "robot":
        raise ModelError(f"{where}: expected a <robot> URDF root element, got <{root.tag}>")
    for mesh in root.iter("mesh"):
        fn = mesh.get("filename")
        if fn:
            mesh.set("filename", _resolve_uri(fn, base))
    ext = root.find("mujoco")
    if ext is None:
        ext = ET.SubElement(root, "mujoco")
    comp = ext.find("compiler")
    if comp is None:
        comp = ET.SubElement(ext, "compiler")
    for k, v in (("discardvisual", "false"), ("fusestatic", "false"), ("strippath", "false")):
        comp.attrib.setdefault(k, v)
    if "meshdir" in comp.attrib:  # a meshdir of the extension is relative to the URDF, as MuJoCo reads it
        md = Path(comp.attrib["meshdir"])
        comp.set("meshdir", str(md if md.is_absolute() else (base / md).resolve()))
    return ET.tostring(root, encoding="unicode")


def load_spec(model: str | Path | Mapping[str, Any], *, base: Path | None = None,
              source: str = "<config>", key: str = "model") -> tuple[mujoco.MjSpec, Path | None, str]:
    """Parse a model into an :class:`mujoco.MjSpec` (not compiled).

    Args:
        model: an MJCF (``.xml``) or URDF (``.urdf``, or any file whose root is ``<robot>``)
            path, relative to ``base``; or ``{"robot_description": "<robot ...>"}`` (a ROS
            parameter's URDF/MJCF text; meshes relative to ``base``).
        base: directory relative paths resolve against (the config file's), default cwd.
        source, key: config file and key for messages.

    Returns:
        ``(spec, path or None, where)`` with ``where`` naming the model in messages.

    Raises:
        ModelError: missing file, unreadable XML, a model MuJoCo cannot parse (its message).
    """
    base = Path(base) if base is not None else Path.cwd()
    if isinstance(model, Mapping):
        bad = [k for k in model if k != "robot_description"]
        if bad or not isinstance(model.get("robot_description"), str):
            raise ModelError(f"{source}:{key}: expected a path or {{robot_description: '<robot ...>'}}, "
                             f"got keys {list(model)}")
        text, path, where = model["robot_description"], None, f"{source}:{key}.robot_description"
        model_files(base / "robot_description", text=text)  # its meshes: regular files within the bound
    else:
        path = Path(str(model)).expanduser()
        if not path.is_absolute():
            path = (base / path).resolve()
        where = str(path)
        if not path.exists():
            raise ModelError(f"{source}:{key}: model file not found: {path}")
        text = _read_model_text(path, "the model file")  # a regular file within the bound, never a FIFO
        model_files(path, text=text)  # every include and asset checked before MuJoCo opens any of them
        base = path.parent
    urdf = is_urdf_text(text) or (path is not None and path.suffix.lower() == ".urdf")
    try:
        if urdf:
            spec = mujoco.MjSpec.from_string(_prepare_urdf(text, base, where))
        elif path is not None:
            spec = mujoco.MjSpec.from_file(str(path))
        else:
            spec = mujoco.MjSpec.from_string(text)
            if not spec.compiler.meshdir:
                spec.compiler.meshdir = str(base)
    except ValueError as err:
        kind = "URDF" if urdf else "MJCF"
        raise ModelError(f"{where}: MuJoCo cannot load this {kind}: {' '.join(str(err).split())}") from None
    return spec, path, where


# -- config blocks -----------------------------------------------------------------
def _vec(v: Any, n: int, where: str, what: str) -> tuple[float, ...]:
    if not isinstance(v, (list, tuple)) or len(v) != n or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v):
        raise ModelError(f"{where}: expected {what} ({n} numbers), got {v!r}")
    return tuple(float(x) for x in v)


def _unknown(block: Mapping[str, Any], valid: Sequence[str], where: str) -> None:
    for k in block:
        if k not in valid:
            close = difflib.get_close_matches(str(k), list(valid), n=1)
            raise ModelError(f"{where}.{k}: unknown key" + (f" (did you mean {close[0]}?)" if close else "")
                             + f"; valid: {', '.join(valid)}")


def parse_markers(entries: Any, *, source: str = "<config>", key: str = "markers") -> list[MarkerSpec]:
    """Validate a ``markers:`` list: ``[{name, site | body, rgba: [r, g, b, a], radius: m, pos: [x, y, z]}]``.

    Raises:
        ModelError: ``source:markers[i].key: expected ..., got ...``.
    """
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ModelError(f"{source}:{key}: expected a list of {{name, site|body, rgba, radius}}, got {entries!r}")
    out, seen = [], set()
    for i, e in enumerate(entries):
        w = f"{source}:{key}[{i}]"
        if not isinstance(e, Mapping):
            raise ModelError(f"{w}: expected a mapping {{name, site|body, rgba, radius}}, got {e!r}")
        _unknown(e, _MARKER_KEYS, w)
        name = e.get("name")
        if not isinstance(name, str) or not name:
            raise ModelError(f"{w}.name: expected a marker name (text), got {name!r}")
        if name in seen:
            raise ModelError(f"{w}.name: duplicate marker name {name!r}")
        seen.add(name)
        if ("site" in e) == ("body" in e):
            raise ModelError(f"{w}: give exactly one of 'site' or 'body' (where the marker sits)")
        kind = "site" if "site" in e else "body"
        if not isinstance(e[kind], str) or not e[kind]:
            raise ModelError(f"{w}.{kind}: expected a {kind} name (text), got {e[kind]!r}")
        rgba = _vec(e.get("rgba", [1, 0, 0, 1]), 4, f"{w}.rgba", "[r, g, b, a] in 0..1")
        if not all(0.0 <= c <= 1.0 for c in rgba):
            raise ModelError(f"{w}.rgba: components must be in [0, 1], got {list(rgba)}")
        r = e.get("radius", 0.01)
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not (r > 0 and math.isfinite(r)):
            raise ModelError(f"{w}.radius: expected a radius > 0 in m, got {r!r}")
        pos = _vec(e.get("pos", [0, 0, 0]), 3, f"{w}.pos", "[x, y, z] offset in m")
        out.append(MarkerSpec(name, (kind, e[kind]), rgba, float(r), pos, w))  # type: ignore[arg-type]
    return out


def parse_actuators(entries: Any, *, source: str = "<config>", key: str = "actuators") -> list[ActuatorSpec]:
    """The mapping entries of an ``actuators:`` list (plain names are existing actuators, skipped here).

    Entry: ``{name, joint, kind: motor|position|velocity, gear: 1, kp: 10, kv: 1, ctrlrange: [lo, hi],
    forcerange: [lo, hi]}``.

    Raises:
        ModelError: ``source:actuators[i].key: expected ..., got ...``.
    """
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ModelError(f"{source}:{key}: expected a list of actuator names or {{name, joint, kind}}, got {entries!r}")
    out = []
    for i, e in enumerate(entries):
        w = f"{source}:{key}[{i}]"
        if isinstance(e, str):
            continue
        if not isinstance(e, Mapping):
            raise ModelError(f"{w}: expected an actuator name or {{name, joint, kind, gear}}, got {e!r}")
        _unknown(e, _ACTUATOR_KEYS, w)
        for k in ("name", "joint"):
            if not isinstance(e.get(k), str) or not e.get(k):
                raise ModelError(f"{w}.{k}: expected text, got {e.get(k)!r}")
        kind = e.get("kind", "motor")
        if kind not in _ACTUATOR_KINDS:
            close = difflib.get_close_matches(str(kind), _ACTUATOR_KINDS, n=1)
            raise ModelError(f"{w}.kind: expected one of {', '.join(_ACTUATOR_KINDS)}, got {kind!r}"
                             + (f" (did you mean {close[0]}?)" if close else ""))
        nums = {}
        for k, d in (("gear", 1.0), ("kp", 10.0), ("kv", 1.0)):
            v = e.get(k, d)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ModelError(f"{w}.{k}: expected a finite number, got {v!r}")
            nums[k] = float(v)
        ranges = {}
        for k in ("ctrlrange", "forcerange"):
            if e.get(k) is not None:
                lo, hi = _vec(e[k], 2, f"{w}.{k}", "[lower, upper]")
                if not lo < hi:
                    raise ModelError(f"{w}.{k}: expected lower < upper, got {[lo, hi]}")
                ranges[k] = (lo, hi)
        out.append(ActuatorSpec(e["name"], e["joint"], kind, nums["gear"], nums["kp"], nums["kv"],
                                ranges.get("ctrlrange"), ranges.get("forcerange"), w))
    return out


# -- building -----------------------------------------------------------------------
def _names(items: Any) -> list[str]:
    return [x.name for x in items if x.name]


def _mjcamera_values(camera: PinholeCamera) -> tuple[np.ndarray, np.ndarray]:
    """MuJoCo camera position (3,) and quaternion (4,) for ``camera`` (MuJoCo cameras look along
    their -z with y up: the optical frame with y and z flipped; orthographic cameras are shifted
    sideways so that the principal point offset is a translation)."""
    rot = camera.rotation @ np.diag([1.0, -1.0, -1.0])
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, rot.ravel())
    pos = np.asarray(camera.position, float)
    if camera.orthographic:
        opt = camera.rotation
        pos = pos + opt[:, 0] * ((camera.width - 1) / 2.0 - camera.cx) / camera.fx \
                  + opt[:, 1] * ((camera.height - 1) / 2.0 - camera.cy) / camera.fy
    return pos, quat


def set_camera(model: mujoco.MjModel, camera_id: int, camera: PinholeCamera) -> None:
    """Write ``camera``'s pose and intrinsics into MuJoCo camera ``camera_id`` of a compiled model
    (no recompilation; call ``mj_camlight`` or ``mj_forward`` before rendering).

    Raises:
        ModelError: an orthographic camera with fx != fy (MuJoCo's are square), or a
            perspective/orthographic switch (fixed at build time).
    """
    ortho = int(model.cam_projection[camera_id]) == int(mujoco.mjtProjection.mjPROJ_ORTHOGRAPHIC)
    if ortho != camera.orthographic:
        raise ModelError(f"camera '{camera.name}': cannot switch between perspective and orthographic at run time")
    pos, quat = _mjcamera_values(camera)
    model.cam_pos[camera_id] = pos
    model.cam_quat[camera_id] = quat
    model.cam_resolution[camera_id] = (camera.width, camera.height)
    if camera.orthographic:
        if abs(camera.fx - camera.fy) > 1e-9 * camera.fx:
            raise ModelError(f"camera '{camera.name}': an orthographic camera needs fx == fy, got {camera.fx}, "
                             f"{camera.fy}")
        model.cam_sensorsize[camera_id] = (0.0, 0.0)
        model.cam_fovy[camera_id] = camera.height / camera.fy  # orthographic fovy: the vertical extent, m
    else:
        model.cam_sensorsize[camera_id] = (camera.width, camera.height)
        model.cam_intrinsic[camera_id] = (camera.fx, camera.fy, (camera.width - 1) / 2.0 - camera.cx,
                                          (camera.height - 1) / 2.0 - camera.cy)


def _add_camera(spec: mujoco.MjSpec, camera: PinholeCamera) -> None:
    c = spec.worldbody.add_camera(name=CAMERA_NAME)
    pos, quat = _mjcamera_values(camera)
    c.pos, c.quat = pos, quat
    c.resolution = [camera.width, camera.height]
    if camera.orthographic:
        c.proj = mujoco.mjtProjection.mjPROJ_ORTHOGRAPHIC
        c.fovy = camera.height / camera.fy
    else:
        c.sensor_size = [camera.width, camera.height]
        c.focal_pixel = [camera.fx, camera.fy]
        c.principal_pixel = [(camera.width - 1) / 2.0 - camera.cx, (camera.height - 1) / 2.0 - camera.cy]
    g = spec.visual.global_
    g.offwidth = max(int(g.offwidth), camera.width)
    g.offheight = max(int(g.offheight), camera.height)


def build_model(model: str | Path | Mapping[str, Any], *, markers: Sequence[MarkerSpec] = (),
                actuators: Sequence[ActuatorSpec] = (), camera: PinholeCamera | None = None,
                base: Path | None = None, source: str = "<config>", key: str = "model",
                not_simple: Sequence[str] = ()) -> BuiltModel:
    """Load ``model`` (see :func:`load_spec`), add markers, actuators and the camera, compile.

    Args:
        model: path or ``{robot_description: text}``.
        markers: from :func:`parse_markers`; their site/body must exist in the model.
        actuators: from :func:`parse_actuators`; their joint must exist, the name must be new.
        camera: the rig's camera (added as :data:`CAMERA_NAME`), or None.
        base, source, key: see :func:`load_spec`.
        not_simple: bodies compiled with ``simple="false"``: MuJoCo's shortcut for a body whose
            inertial frame is its own frame refuses a parameter that moves its centre of mass
            (``body_ipos``) or inertia axes (``body_iquat``) after compilation.

    Returns:
        :class:`BuiltModel`.

    Raises:
        ModelError: one line naming the file/key: a missing site/body/joint (with the nearest
            valid name), a duplicate name, or MuJoCo's compile error.
    """
    spec, path, where = load_spec(model, base=base, source=source, key=key)
    for b in spec.bodies:
        if b.name and b.name in not_simple:
            b.simple = 0
    sites, bodies, joints = _names(spec.sites), _names(spec.bodies), _names(spec.joints)
    flat = None
    for mk in markers:
        kind, pname = mk.parent
        valid = sites if kind == "site" else bodies
        if pname not in valid:
            close = difflib.get_close_matches(pname, valid, n=1)
            raise ModelError(f"{mk.where}.{kind}: no {kind} named {pname!r} in {where}"
                             + (f" (did you mean {close[0]}?)" if close else f"; {kind}s: {valid[:12]}"))
        if mk.name in sites or mk.name in bodies:
            if not (kind == "site" and pname == mk.name):
                raise ModelError(f"{mk.where}.name: {mk.name!r} is already a site or body of {where}; "
                                 "choose another marker name")
        if flat is None:
            flat = spec.add_material(name="vid2sid_marker_flat")
            flat.emission, flat.specular, flat.shininess, flat.reflectance = 1.0, 0.0, 0.0, 0.0
        if kind == "site":
            s = spec.site(pname)
            body, origin, rot = s.parent, np.asarray(s.pos, float), np.zeros(9)
            mujoco.mju_quat2Mat(rot, np.asarray(s.quat, float))
            centre = origin + rot.reshape(3, 3) @ np.asarray(mk.pos)
        else:
            body, centre = spec.body(pname), np.asarray(mk.pos, float)
        mat = spec.add_material(name=f"vid2sid_marker_{mk.name}")
        mat.rgba = list(mk.rgba)
        mat.emission, mat.specular, mat.shininess, mat.reflectance = 1.0, 0.0, 0.0, 0.0
        body.add_geom(name=f"vid2sid_marker_{mk.name}", type=mujoco.mjtGeom.mjGEOM_SPHERE,
                      size=[mk.radius, 0, 0], pos=centre, rgba=list(mk.rgba), material=mat.name,
                      contype=0, conaffinity=0, mass=0.0, density=0.0, group=0)
        if mk.name not in sites:
            body.add_site(name=mk.name, pos=centre, size=[mk.radius * 0.2, 0, 0], rgba=[0, 0, 0, 0])
            sites.append(mk.name)
    existing_act = _names(spec.actuators)
    for a in actuators:
        if a.joint not in joints:
            close = difflib.get_close_matches(a.joint, joints, n=1)
            raise ModelError(f"{a.where}.joint: no joint named {a.joint!r} in {where}"
                             + (f" (did you mean {close[0]}?)" if close else f"; joints: {joints[:12]}"))
        if a.name in existing_act:
            raise ModelError(f"{a.where}.name: {where} already has an actuator named {a.name!r}")
        existing_act.append(a.name)
        act = spec.add_actuator(name=a.name, target=a.joint, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.gear = [a.gear, 0, 0, 0, 0, 0]
        if a.kind == "motor":
            act.set_to_motor()
        elif a.kind == "position":
            act.set_to_position(kp=a.kp, kv=a.kv)
        else:
            act.set_to_velocity(kv=a.kv)
        if a.ctrlrange is not None:
            act.ctrllimited, act.ctrlrange = mujoco.mjtLimited.mjLIMITED_TRUE, list(a.ctrlrange)
        if a.forcerange is not None:
            act.forcelimited, act.forcerange = mujoco.mjtLimited.mjLIMITED_TRUE, list(a.forcerange)
    if camera is not None:
        for old in [c for c in spec.cameras if c.name == CAMERA_NAME]:  # a calibrated model written by a run
            spec.delete(old)  # (export_model) carries the camera it was filmed with: the rig's replaces it
        _add_camera(spec, camera)
    try:
        m = spec.compile()
    except ValueError as err:
        raise ModelError(f"{where}: MuJoCo cannot compile the model: {' '.join(str(err).split())}") from None
    cam_id = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_CAMERA, CAMERA_NAME) if camera is not None else -1
    if camera is not None:
        set_camera(m, cam_id, camera)
    try:
        text = path.read_text() if path is not None else str(dict(model)["robot_description"])
    except (OSError, UnicodeDecodeError):
        text = ""
    return BuiltModel(spec=spec, model=m, path=path, camera_id=int(cam_id), source=where,
                      timestep=declared_timestep(text))


def absolute_asset_paths(spec: mujoco.MjSpec, base: str | Path | None = None) -> None:
    """Make every asset file of ``spec`` an absolute path, so its XML loads from any directory.

    MuJoCo resolves a relative mesh, skin or height-field ``file`` against the compiler's
    ``meshdir`` and a texture's (and its ``cubefiles``) against ``texturedir``, each itself relative
    to the model file's directory (``spec.modelfiledir``); an exported copy elsewhere would look
    for them beside itself. Here each such path is resolved the same way and written absolute,
    and ``meshdir``/``texturedir`` are cleared (``<include>`` files are already merged by
    :meth:`mujoco.MjSpec.to_xml`). Modifies ``spec`` in place.

    Args:
        spec: the model's MjSpec. base: the model file's directory when ``spec`` was parsed from
            a string (``spec.modelfiledir`` empty), default the current directory.
    """
    root = Path(spec.modelfiledir or base or Path.cwd())

    def folder(d: str) -> Path:
        return root / d if d and not Path(d).is_absolute() else (Path(d) if d else root)

    def fix(f: str, d: Path) -> str:
        return f if not f or Path(f).is_absolute() else str((d / f).resolve())

    mesh_dir, tex_dir = folder(spec.compiler.meshdir), folder(spec.compiler.texturedir)
    for group in (spec.meshes, spec.skins, spec.hfields):
        for a in group:
            a.file = fix(a.file, mesh_dir)
    for t in spec.textures:
        t.file = fix(t.file, tex_dir)
        t.cubefiles = [fix(f, tex_dir) for f in t.cubefiles]
    spec.compiler.meshdir = ""
    spec.compiler.texturedir = ""


def compiled_model_xml(spec: mujoco.MjSpec, model: mujoco.MjModel, *, timestep: float | None = None,
                       base: str | Path | None = None) -> str:
    """MJCF text of ``model``'s current values (what the calibration wrote), on ``spec``'s structure.

    ``spec`` is the model's source, freshly loaded (not compiled yet): it is compiled, the
    compiled model's values are copied back into it (``MjSpec.copy_back``: masses and inertias
    become explicit ``<inertial>`` elements of every body), and the compiler options that would
    re-derive or rescale those values on reload are reset (``inertiafromgeom="auto"``,
    ``settotalmass`` off, no mass/inertia bounds or balancing), so the file reloads to the same
    masses, inertias and armatures and re-simulates the same trajectories.

    Args:
        spec: MjSpec of the model file (plus the rig's markers, actuators, camera).
        model: compiled model holding the values to write (its structure must match ``spec``'s).
        timestep: ``<option timestep>`` to write, s (the author's; the model's current one is the
            last rollout's substep), or None to keep the model's.
        base: the model file's directory for a spec parsed from a string (asset paths are made
            absolute, :func:`absolute_asset_paths`, so the text loads from any directory).

    Raises:
        ValueError: MuJoCo cannot compile ``spec`` or copy ``model`` into it.
    """
    spec.compile()
    spec.copy_back(model)
    c = spec.compiler
    c.inertiafromgeom = mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_AUTO
    c.settotalmass = -1.0
    c.boundmass = 0.0
    c.boundinertia = 0.0
    c.balanceinertia = False
    if timestep is not None:
        spec.option.timestep = timestep
    absolute_asset_paths(spec, base)
    return spec.to_xml()


def distortion_maps(camera: PinholeCamera) -> tuple[np.ndarray, np.ndarray] | None:
    """``cv2.remap`` maps that turn an ideal pinhole render into ``camera``'s distorted image.

    For every pixel of the distorted output, the ideal pixel it sees
    (:meth:`PinholeCamera.undistort_pixels`), as two (H, W) float32 arrays; None when the
    camera has no distortion.
    """
    if not camera.distorted:
        return None
    v, u = np.mgrid[0:camera.height, 0:camera.width].astype(float)
    src = camera.undistort_pixels(np.stack([u, v], axis=-1))
    return src[..., 0].astype(np.float32), src[..., 1].astype(np.float32)


def rendered_colours(model: Any, *, max_texels: int = 4096) -> np.ndarray:
    """Every base colour a render of ``model`` can show: what a colour tracker can find in it.

    The colours of the geoms and sites of the groups MuJoCo's default scene draws (0-2) that
    are not transparent (alpha > 0): the element's ``rgba``, its material's ``rgba``, and its
    material's texture texels (subsampled to ``max_texels`` per texture) times the material
    colour. Lighting scales these (hue and saturation kept; specular light and clipping only
    desaturate), so a tracker hue range that none of them falls in cannot see anything.

    Args:
        model: a compiled ``mujoco.MjModel``.
        max_texels: texels read per texture.

    Returns:
        (N, 3) float RGB in [0, 1] (duplicates removed).
    """
    out: list[np.ndarray] = []
    texid = np.asarray(model.mat_texid).reshape(model.nmat, -1) if model.nmat else np.zeros((0, 1), int)

    def add(rgba: np.ndarray, matid: int) -> None:
        if rgba[3] > 0:
            out.append(np.asarray(rgba[:3], float)[None])
        if matid < 0:
            return
        mat = np.asarray(model.mat_rgba[matid], float)
        if mat[3] <= 0:
            return
        out.append(mat[None, :3])
        for t in texid[matid]:
            if t < 0:
                continue
            n, ch = int(model.tex_width[t] * model.tex_height[t]), int(model.tex_nchannel[t])
            adr = int(model.tex_adr[t])
            texels = np.asarray(model.tex_data[adr:adr + n * ch], float).reshape(n, ch)[:, :3] / 255.0
            step = max(1, n // max_texels)
            out.append(texels[::step] * mat[None, :3])

    for i in range(model.ngeom):
        if 0 <= int(model.geom_group[i]) <= 2:
            add(np.asarray(model.geom_rgba[i], float), int(model.geom_matid[i]))
    for i in range(model.nsite):
        if 0 <= int(model.site_group[i]) <= 2:
            add(np.asarray(model.site_rgba[i], float), int(model.site_matid[i]))
    if not out:
        return np.zeros((0, 3))
    return np.unique(np.round(np.concatenate(out), 4), axis=0)
