"""Trial source kinds: where the measurements of one trial come from.

A rig config's ``trials[i].source`` holds exactly one kind as key (``video``,
``sim2sim``; the lab-data kinds ``bag``, ``mocap``, ``joint_csv`` register here too).
Each kind is a :class:`SourceKind`:

- ``check(block, ctx) -> block``: validate and normalise the block up front (paths
  resolved against the config file's directory, types, existence of files), raising
  :class:`SourceError` whose message starts with ``ctx.where`` (``file:trials[0].source.video``);
- ``probe(block, ctx) -> (frames, rate) | None``: the recording's length (frames) and
  rate (Hz) without loading it, so free-motion excitations can be sized (None: unknown);
- ``load(block, ctx) -> Recording``: read the measurements (expensive: decode, track);
- ``commands(block, ctx) -> Excitation | None``: the commands recorded with the trial (a joint
  CSV's command columns, a bag's command topic) without reading its camera, or None when the
  source records none (the trial's configured excitation drives the twin);
- ``measurement(block, ctx) -> Trajectory | None``: what the trial measures, without its data:
  a trajectory with no rows but the kind, names, units, frame and ``meta["noise"]`` that
  ``load`` returns (joint coordinates, mocap markers); None = image keypoints of the rig's
  camera (a video, a sim2sim stand-in, a bag's camera).

:func:`register_source` adds a kind; :data:`SOURCES` maps kind -> :class:`SourceKind`.
The rig loader dispatches to them; nothing here knows about calibration.

Built-in kinds:

``video`` — a clip of the robot: ``{video: clip.mp4}`` or ``{video: {path, fps,
repair_frame_timing, background_region}}``; tracked with the rig's tracker; frame range
from the trial's ``frames``.

``sim2sim`` — a stand-in trial: the rig's own twin at hidden parameters, filmed through
its camera (rendered frames + sensor noise + tracker, ``noise: camera``) or with pixel
noise on the projected keypoints (``noise: keypoint``) or exact (``none``). The hidden
truth is ``truth`` (completed with nominal values) or drawn from ``seed`` uniformly in
normalised ``truth_range`` of every free parameter (:func:`vid2sid_ros.core.parameters.draw_ground_truth`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ..core.excitation import Excitation
from ..core.trajectory import Trajectory
from ..sim.base import in_image_valid

__all__ = ["SourceKind", "SourceContext", "Recording", "SourceError", "SOURCES", "register_source", "source_kind",
           "resolve_file", "recording_from_clip", "sim2sim_truth"]


class SourceError(ValueError):
    """A trial source is invalid or cannot be read; one line starting with ``file:key``."""


@dataclass
class SourceContext:
    """What a source kind gets besides its block.

    Attributes:
        where: ``file:trials[i].source.<kind>`` (prefix of every message).
        base_dir: directory relative paths are resolved against (the config file's).
        rig: the :class:`~vid2sid_ros.core.rig.Rig` (None while the config is still being checked).
        trial: the :class:`~vid2sid_ros.core.rig.TrialSpec` (None while checking).
        keep_frames: keep camera frames (thumbnails) in the recording, for reports and VLMs.
        keypoints: the rig's keypoint names (known while the config is checked, before ``rig``).
    """

    where: str
    base_dir: Path
    rig: Any = None
    trial: Any = None
    keep_frames: bool = False
    keypoints: tuple[str, ...] = ()


@dataclass
class Recording:
    """The measurements of one trial, before the train/holdout split.

    Attributes:
        trajectory: keypoints (T, K, 2) px (or the measurement's unit), ``steps`` = time
            slot of each row at ``rate`` (slot 0 = the first used frame), ``time`` = steps / rate s.
        rate: sample rate, Hz (one excitation row per slot).
        excitation: commands recorded with the trial (bags), one row per slot; None = the
            trial's configured excitation is used.
        frames: camera frames or thumbnails, (N, H, W, 3) uint8 RGB, or None.
        frame_scale: factor of ``frames`` relative to the camera image (thumbnails: 0.5).
        frame_every: ``frames[i]`` is row ``i * frame_every``.
        truth: hidden parameters (sim2sim only), SI units.
        warnings: problems found while reading (lost markers, repaired frames...).
        meta: free-form (file, fps, repairs...).
    """

    trajectory: Trajectory
    rate: float
    excitation: Excitation | None = None
    frames: np.ndarray | None = None
    frame_scale: float = 1.0
    frame_every: int = 1
    truth: dict[str, float] | None = None
    warnings: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceKind:
    """One trial source kind (see module docstring).

    Attributes:
        kind: the key in ``trials[].source``.
        check: ``check(block, ctx) -> normalised block``; raises :class:`SourceError`.
        load: ``load(block, ctx) -> Recording``; raises :class:`SourceError`.
        probe: ``probe(block, ctx) -> (frames, rate_hz) | None``.
        commands: ``commands(block, ctx) -> Excitation | None``: the recorded commands, one row
            per time slot, as ``load`` gives them (``Recording.excitation``), read without the
            measurements; None = none recorded.
        measurement: ``measurement(block, ctx) -> Trajectory | None``: a zero-row trajectory of
            the kind, names, units, frame and ``meta["noise"]`` (1 sigma in the unit, when the
            block declares one) of ``load``'s; None = image keypoints (px) of the rig's camera.
        shorthand: option a non-mapping block is read as (``video: clip.mp4`` = ``{path: clip.mp4}``).
        keys: schema rows ``(option, type, unit, default, meaning)`` for the reference page.
        doc: one paragraph.
    """

    kind: str
    check: Callable[[dict, SourceContext], dict]
    load: Callable[[dict, SourceContext], Recording]
    probe: Callable[[dict, SourceContext], tuple[int, float] | None] = lambda block, ctx: None
    shorthand: str | None = "path"
    keys: tuple[tuple[str, str, str, Any, str], ...] = ()
    doc: str = ""
    commands: Callable[[dict, SourceContext], Excitation | None] = lambda block, ctx: None
    measurement: Callable[[dict, SourceContext], Trajectory | None] = lambda block, ctx: None


#: kind -> SourceKind
SOURCES: dict[str, SourceKind] = {}


def register_source(kind: SourceKind) -> SourceKind:
    """Register a trial source kind; its ``keys`` join the rig config reference (``docs/rig_config.md``).

    Returns:
        ``kind`` (so it can be used as an expression).

    Raises:
        ValueError: if the kind is already registered.
    """
    if kind.kind in SOURCES:
        raise ValueError(f"trial source kind {kind.kind!r} is already registered")
    SOURCES[kind.kind] = kind
    return kind


def source_kind(kind: str) -> SourceKind:
    """The registered kind.

    Raises:
        SourceError: listing the registered kinds.
    """
    if kind not in SOURCES:
        raise SourceError(f"unknown trial source kind {kind!r}; valid kinds: {', '.join(SOURCES)}")
    return SOURCES[kind]


def resolve_file(value: Any, ctx: SourceContext, key: str, *, must_exist: bool = True) -> Path:
    """A file named by ``block[key]``: absolute, relative to the config's directory, or ``pkg:``.

    Raises:
        SourceError: ``where.key: expected a file path, got ...``, ``... file not found: PATH`` or
            ``... PATH is a FIFO (named pipe), expected a regular file``.
    """
    from ..core.files import file_problem
    from ..share import resolve_path

    if not isinstance(value, (str, Path)) or not str(value).strip():
        raise SourceError(f"{ctx.where}.{key}: expected a file path, got {value!r}")
    p = resolve_path(value, ctx.base_dir)
    why = file_problem(p) if must_exist else None
    if why:  # missing, or a FIFO / directory / device: never opened (a FIFO would block the read)
        raise SourceError(f"{ctx.where}.{key}: {why}")
    return p


def _check_keys(block: Mapping[str, Any], allowed: Mapping[str, Any], ctx: SourceContext) -> None:
    import difflib

    for k in block:
        if k not in allowed:
            close = difflib.get_close_matches(str(k), list(allowed), n=1, cutoff=0.6)
            raise SourceError(f"{ctx.where}.{k}: unknown key" + (f" (did you mean {close[0]}?)" if close else "")
                              + f"; valid keys here: {', '.join(allowed)}")


def _path_block(block: Mapping[str, Any], keys: Mapping[str, Any], ctx: SourceContext, what: str, *,
                resolve: Any = None) -> dict:
    """A file-backed source block: unknown keys refused, defaults from ``keys`` filled in, ``path`` required.

    Args:
        block: the ``trials[i].source.<kind>`` mapping as written.
        keys: the kind's valid keys with their defaults.
        what: what ``path`` names, for the message when it is missing.
        resolve: ``resolve(value, ctx, key) -> Path`` (default :func:`resolve_file`, a file that exists).

    Raises:
        SourceError: ``where.KEY: unknown key ...`` or ``where.path: missing (WHAT)``, or the resolver's error.
    """
    _check_keys(block, keys, ctx)
    if "path" not in block:
        raise SourceError(f"{ctx.where}.path: missing ({what})")
    out = dict(keys, **block)
    out["path"] = str((resolve or resolve_file)(block["path"], ctx, "path"))
    return out


def _number(block: Mapping[str, Any], key: str, ctx: SourceContext, *, positive: bool = False,
            allow_none: bool = True) -> float | None:
    v = block.get(key)
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)) or (
            positive and v <= 0):
        raise SourceError(f"{ctx.where}.{key}: expected a {'positive ' if positive else ''}number, got {v!r}")
    return float(v)


# -- video --------------------------------------------------------------------------------------
_VIDEO_KEYS = {"path": None, "fps": None, "repair_frame_timing": True, "background_region": None}


def _video_check(block: dict, ctx: SourceContext) -> dict:
    out = _path_block(block, _VIDEO_KEYS, ctx, "the video file")
    out["fps"] = _number(out, "fps", ctx, positive=True)
    if not isinstance(out["repair_frame_timing"], bool):
        raise SourceError(f"{ctx.where}.repair_frame_timing: expected true or false, got {out['repair_frame_timing']!r}")
    bg = out["background_region"]
    if bg is not None and not (isinstance(bg, list) and len(bg) == 4
                               and all(isinstance(x, int) and not isinstance(x, bool) for x in bg)
                               and bg[0] < bg[2] and bg[1] < bg[3]):
        raise SourceError(f"{ctx.where}.background_region: expected [x0, y0, x1, y1] px integers with x0 < x1 "
                          f"and y0 < y1, got {bg!r}")
    return out


def _frames_of(ctx: SourceContext) -> tuple[int, int | None]:
    return tuple(getattr(ctx.trial, "frames", (0, None)) or (0, None))  # type: ignore[return-value]


def _video_probe(block: dict, ctx: SourceContext) -> tuple[int, float] | None:
    from .video import VideoError, video_info

    try:
        info = video_info(block["path"])
    except VideoError as err:
        raise SourceError(f"{ctx.where}.path: {err}") from None
    fps = float(block.get("fps") or info.get("fps") or 0.0)
    start, stop = _frames_of(ctx)
    n = int(info.get("frames") or 0)
    n = (min(n, stop) if stop is not None else n) - start
    if not (fps > 0 and math.isfinite(fps)):
        raise SourceError(f"{ctx.where}.fps: the container of {block['path']} reports no frame rate; set fps")
    return (n, fps) if n > 0 else None


def _video_load(block: dict, ctx: SourceContext) -> Recording:
    from .clip import MAX_THUMBS, THUMB_MAX_WIDTH, ClipError, track_clip
    from .video import VideoError

    rig = ctx.rig
    if rig is None or not getattr(rig, "tracker", None):
        raise SourceError(f"{ctx.where}: the rig has no tracker configuration to track the video with")
    from ..perception.quality import min_tracked_fraction

    start, stop = _frames_of(ctx)
    try:
        clip = track_clip(block["path"], rig.tracker, fps=block.get("fps"), start_frame=int(start),
                          max_frames=None if stop is None else int(stop) - int(start),
                          thumb_scale=0.5 if ctx.keep_frames else None, thumb_max_width=THUMB_MAX_WIDTH,
                          max_thumbs=MAX_THUMBS,  # bounded: at most 150 thumbnails 320 px wide, not GBs
                          min_tracked_fraction=min_tracked_fraction(getattr(rig, "config", None), ctx.where))
    except (ClipError, VideoError) as err:
        raise SourceError(f"{ctx.where}: {err}") from None
    except ValueError as err:  # tracker config errors
        raise SourceError(f"{ctx.where}: tracker: {err}") from None
    return recording_from_clip(clip, name=getattr(ctx.trial, "name", None) or clip.path.stem,
                               retime=bool(block.get("repair_frame_timing", True)), start_frame=int(start),
                               background_region=block.get("background_region"))


def recording_from_clip(clip: Any, *, name: str, retime: bool = True, start_frame: int = 0,
                        background_region: Any = None) -> Recording:
    """A :class:`Recording` from a :class:`~vid2sid_ros.io.clip.TrackedClip`, re-timed
    (:func:`~vid2sid_ros.perception.frame_timing.repair_frame_timing`) unless ``retime=False`` or the
    container's timestamps already gave each frame its slot (a variable-frame-rate clip,
    ``trajectory.meta["timestamp_slots"]``: the motion-based repair assumes one slot per frame)."""
    from ..perception.frame_timing import repair_frame_timing

    traj, notes = clip.trajectory, []
    if retime and not (traj.meta or {}).get("timestamp_slots"):
        traj, notes = repair_frame_timing(traj, clip.fps)
    traj = Trajectory(traj.time, traj.keypoints, traj.valid, traj.names, "real", name, traj.steps, dict(traj.meta))
    return Recording(traj, clip.fps, frames=clip.thumbnails, frame_scale=clip.thumb_scale,
                     frame_every=clip.thumb_every, warnings=list(clip.warnings) + notes,
                     meta={"video": str(clip.path), "fps": clip.fps, "size": clip.size, "retimed": notes,
                           "frames": int(clip.trajectory.num_frames), "start_frame": int(start_frame),
                           "background_region": background_region})


register_source(SourceKind(
    "video", _video_check, _video_load, _video_probe, "path",
    keys=(("path", "path", "", "required", "The video file (mp4, mov, avi...)."),
          ("fps", "number | null", "Hz", None, "Frame rate; null = the container's (set it for slow-motion clips)."),
          ("repair_frame_timing", "boolean", "", True, "Give single dropped/repeated frames their true time slot, "
           "detected from the motion (`vid2sid_ros.perception.frame_timing`)."),
          ("background_region", "numbers[4]", "px", None, "A static textured patch [x0, y0, x1, y1] on which the "
           "camera drift is measured independently of the fit.")),
    doc="A clip of the robot, tracked with the rig's tracker."))


# -- sim2sim ------------------------------------------------------------------------------------
_SIM_KEYS = {"seed": 0, "truth": None, "truth_range": [0.15, 0.85], "noise": "auto", "keypoint_sigma_px": 0.5}
NOISE_MODES = ("auto", "camera", "keypoint", "none")


def _sim_check(block: dict, ctx: SourceContext) -> dict:
    _check_keys(block, _SIM_KEYS, ctx)
    out = dict(_SIM_KEYS, **block)
    if isinstance(out["seed"], bool) or not isinstance(out["seed"], int):
        raise SourceError(f"{ctx.where}.seed: expected an integer, got {out['seed']!r}")
    t = out["truth"]
    if t is not None and not (isinstance(t, Mapping) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in t.values())):
        raise SourceError(f"{ctx.where}.truth: expected a mapping of parameter names to numbers, got {t!r}")
    rng = out["truth_range"]
    if (not isinstance(rng, (list, tuple)) or len(rng) != 2
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in rng)
            or not 0.0 <= rng[0] < rng[1] <= 1.0):
        raise SourceError(f"{ctx.where}.truth_range: expected [low, high] with 0 <= low < high <= 1 (normalised "
                          f"units), got {rng!r}")
    if out["noise"] not in NOISE_MODES:
        raise SourceError(f"{ctx.where}.noise: expected one of {', '.join(NOISE_MODES)}, got {out['noise']!r}")
    _number(out, "keypoint_sigma_px", ctx, positive=True, allow_none=False)
    return out


def sim2sim_truth(block: Mapping[str, Any], rig: Any, where: str) -> dict[str, float]:
    """The hidden parameters of a sim2sim block (all parameters, SI).

    Raises:
        SourceError: an unknown parameter or a value outside its bounds.
    """
    from ..core.parameters import draw_ground_truth

    if block.get("truth"):
        t = dict(block["truth"])
        for k, v in t.items():
            if k not in rig.parameters:
                raise SourceError(f"{where}.truth.{k}: unknown parameter; valid: {', '.join(rig.parameters.names)}")
            spec = rig.parameters[k]
            if not spec.lower <= v <= spec.upper:
                raise SourceError(f"{where}.truth.{k}: expected a number in [{spec.lower:g}, {spec.upper:g}] "
                                  f"{spec.unit}, got {v!r}")
        return rig.parameters.complete(t)
    lo, hi = block.get("truth_range", (0.15, 0.85))
    return draw_ground_truth(rig.parameters, int(block.get("seed", 0)), low=float(lo), high=float(hi))


def _sim_load(block: dict, ctx: SourceContext) -> Recording:
    rig, trial = ctx.rig, ctx.trial
    if rig is None or trial is None:
        raise SourceError(f"{ctx.where}: a sim2sim source needs its rig and trial")
    # the whole-trial excitation as the rig holds it (meta: the trial's initial state and time offset)
    parts = [e for sets in rig.excitations.values() for e in sets if (e.meta or {}).get("trial") == trial.name]
    exc = max(parts, key=lambda e: e.num_steps) if parts else trial.excitation
    if exc is None:
        raise SourceError(f"{ctx.where}: a sim2sim trial needs an excitation (its length sets the trial's)")
    truth = sim2sim_truth(block, rig, ctx.where)
    twin = rig.make_twin()
    twin.set_parameters(truth)
    noise = block.get("noise", "auto")
    if noise == "auto":
        noise = "camera" if rig.tracker else "keypoint"
    seed = int(block.get("seed", 0))
    rng = np.random.default_rng([seed, 0xC0FFEE, sum(map(ord, trial.name))])
    res = twin.rollout(exc, render=(noise == "camera"))
    if res.diverged:
        raise SourceError(f"{ctx.where}: the twin diverged at the hidden truth: {res.message}")
    gt = res.trajectory
    frames = None
    warnings: list[str] = []
    if noise == "camera":
        from ..perception import make_tracker
        from ..sim.camera_model import SensorNoiseModel

        if res.frames is None:
            raise SourceError(f"{ctx.where}.noise: the twin renders no frames; use noise: keypoint")
        cfg = (rig.config or {}).get("noise")
        model = SensorNoiseModel.from_config(cfg) if cfg else SensorNoiseModel.default()
        noisy, dropped = model.apply(res.frames, seed=int(rng.integers(2 ** 31)))
        tracker = make_tracker(rig.tracker)
        tr = tracker.track(noisy, time=gt.time, invalid_frames=dropped, source="real", trial_id=trial.name)
        if set(tr.names) != set(gt.names):
            raise SourceError(f"{ctx.where}: tracker keypoints {tr.names} differ from the twin's {gt.names}")
        # the tracker's per-frame record and the dropped frames go with it: the tracking check names the causes
        traj = Trajectory(gt.time, tr.keypoints, tr.valid, tuple(tr.names), "real", trial.name, gt.steps,
                          {"blobs": tr.meta.get("blobs", {}), "dropped": np.asarray(dropped, bool).tolist()}
                          ).select(gt.names)
        frames = np.asarray(noisy) if ctx.keep_frames else None
    elif noise == "keypoint":
        kp = gt.keypoints + rng.normal(0.0, float(block.get("keypoint_sigma_px", 0.5)), size=gt.keypoints.shape)
        traj = Trajectory(gt.time, kp, in_image_valid(gt, twin), gt.names, "real", trial.name, gt.steps)
    else:
        traj = Trajectory(gt.time, gt.keypoints, in_image_valid(gt, twin), gt.names, "real", trial.name, gt.steps)
    close = getattr(twin, "close", None)
    if callable(close):
        close()
    return Recording(traj, exc.rate, excitation=exc, frames=frames, truth=dict(truth), warnings=warnings,
                     meta={"noise": noise, "seed": seed})


def _sim_probe(block: dict, ctx: SourceContext) -> tuple[int, float] | None:
    exc = getattr(ctx.trial, "excitation", None)
    return (exc.num_steps, exc.rate) if exc is not None else None


register_source(SourceKind(
    "sim2sim", _sim_check, _sim_load, _sim_probe, None,
    keys=(("seed", "integer", "", 0, "Seed of the hidden truth (when `truth` is not given) and of the noise."),
          ("truth", "mapping", "", None, "Hidden parameter values (SI), completed with nominal values."),
          ("truth_range", "numbers[2]", "1", [0.15, 0.85], "Normalised range the hidden truth is drawn from."),
          ("noise", "string", "", "auto", "camera (render + sensor noise + tracker), keypoint (pixel noise), none; "
           "auto = camera when the rig has a tracker."),
          ("keypoint_sigma_px", "number", "px", 0.5, "Pixel noise of `noise: keypoint`.")),
    doc="A stand-in trial: the rig's twin at hidden parameters."))


# the lab-data kinds (mocap, joint_csv, bag) register themselves on import
from . import lab_sources  # noqa: E402,F401


def rig_image_size(config: Mapping[str, Any] | None, base: Path | str | None = None
                   ) -> tuple[int, int, str] | None:
    """The image size a rig config declares: ``(width, height, where)`` px, or None.

    ``where`` names the key the size came from (``camera.camera_info`` file or ``camera``).
    None when the config declares no ``camera`` block (a ``projection`` twin, whose image scale
    ``px_per_m`` may be calibrated as a nuisance, or a built-in twin's own default).

    Raises:
        SourceError: the ``camera`` block cannot be read (a bad CameraInfo file...).
    """
    from ..core.camera import CameraError, camera_from_config

    config = config or {}
    cam = config.get("camera")
    if isinstance(cam, Mapping) and cam:
        try:
            c = camera_from_config(cam, base=Path(base) if base is not None else None)
        except CameraError as err:
            raise SourceError(str(err)) from None
        where = f"camera.camera_info ({cam['camera_info']})" if cam.get("camera_info") else "camera"
        return int(c.width), int(c.height), where
    return None


def check_clip_size(path: str | Path, config: Mapping[str, Any] | None, *, where: str,
                    base: Path | str | None = None) -> None:
    """Refuse a video whose frame size differs from the rig's camera image size.

    The twin renders and projects its keypoints at the camera's size; pixels tracked in a
    clip of another size would be compared with them as if they were the same pixels, and
    the calibration would fit nonsense. There is no rescaling option: film at the camera's
    size, or describe the camera that filmed the clip.

    Args:
        path: the video file. config: the rig config (its ``camera`` block).
        where: prefix of the error (the trial's source key or the command).
        base: directory a relative ``camera_info`` path is resolved against.

    Raises:
        SourceError: ``where: the clip is WxH px but the rig's camera is wxh px ...``.
    """
    from .video import VideoError, video_info

    size = rig_image_size(config, base)
    if size is None:
        return
    try:
        info = video_info(path)
    except VideoError as err:
        raise SourceError(f"{where}: {err}") from None
    w, h = int(info.get("width") or 0), int(info.get("height") or 0)
    if w <= 0 or h <= 0:
        return  # the container does not tell; the frames are checked when decoded
    if (w, h) != size[:2]:
        raise SourceError(f"{where}: the clip {Path(path).name} is {w}x{h} px but the rig's {size[2]} is "
                          f"{size[0]}x{size[1]} px; film at the camera's size or describe the camera that "
                          "filmed the clip (camera.width/height, or its camera_info)")
