"""The lab-data trial source kinds: ``mocap``, ``joint_csv`` and ``bag`` (registered in :mod:`.sources`).

Each is a block of a rig config's ``trials[].source``; the block is checked up front
(the file is opened and every mapped column / topic verified, so a typo fails before
anything runs), ``probe`` tells the recording's length and ``load`` returns a
:class:`~vid2sid_ros.io.sources.Recording` in the measurement's own unit::

    trials:
      - name: pose1
        source:
          mocap: {path: takes/pose1.csv, markers: {disk1: rod:disk1, disk2: rod:disk2},
                  frame: {up_axis: y}}          # Motive's Y-up world -> the twin's Z-up world
        excitation: release1
      - name: arm1
        source: {joint_csv: {path: arm1.csv, joints: {q1: shoulder}, commands: {u1: shoulder_motor}}}
      - name: lab_step
        source:
          bag: {path: run1.mcap, trial: step, measurement: image,
                topics: {image: /camera/image_raw, command: /forward_position_controller/commands},
                command_names: [flexor], actuators: {flexor: flexor_motor}, rate: 30, split: {gap_s: 0.5}}

``bag`` without ``topics`` reads the package's own bag layout (``recorder_node``). A bag
trial's commands drive the twin (the recording's excitation); ``measurement: joints``
fits the bag's ``/joint_states`` instead of its camera (two trials on the same bag, one
``image`` and one ``joints``, fit both modalities together). Bags are read once per
process (cached by path and modification time).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .sources import Recording, SourceContext, SourceError, SourceKind, _path_block, register_source

__all__ = ["MOCAP_KEYS", "JOINT_CSV_KEYS", "BAG_KEYS"]


def _resolve_any(value: Any, ctx: SourceContext, key: str) -> Path:
    """A file or directory (bags are directories) relative to the config."""
    from ..share import resolve_path

    if not isinstance(value, (str, Path)) or not str(value).strip():
        raise SourceError(f"{ctx.where}.{key}: expected a path, got {value!r}")
    p = resolve_path(value, ctx.base_dir)
    if not p.exists():
        raise SourceError(f"{ctx.where}.{key}: not found: {p}")
    return p


def _frames(ctx: SourceContext) -> tuple[int, int | None]:
    return tuple(getattr(ctx.trial, "frames", (0, None)) or (0, None))  # type: ignore[return-value]


def _name(ctx: SourceContext) -> str:
    return str(getattr(ctx.trial, "name", None) or "trial")


# -- mocap --------------------------------------------------------------------------------------
MOCAP_KEYS = {"path": None, "markers": None, "format": "auto", "unit": None, "rate": None, "time_column": None,
              "frame": None, "noise": None, "trial_column": None, "trial_id": None}


def _mocap_read(block: dict, ctx: SourceContext):
    from .mocap import MocapError, load_mocap

    try:
        return load_mocap(block["path"], markers=block["markers"], format=block["format"], unit=block["unit"],
                          rate=block["rate"], time_column=block["time_column"], frame=block["frame"],
                          trial_column=block["trial_column"], trial_id=block["trial_id"])
    except MocapError as err:
        raise SourceError(f"{ctx.where}: {err}") from None


def _mocap_check(block: dict, ctx: SourceContext) -> dict:
    out = _path_block(block, MOCAP_KEYS, ctx, "the motion-capture CSV/TSV export")
    m = out["markers"]
    if m is None:  # documented default: the rig's keypoint names are the marker labels
        kp = tuple(getattr(ctx, "keypoints", ()) or getattr(getattr(ctx, "rig", None), "keypoints", None) or ())
        m = {str(k): str(k) for k in kp} if kp else None
    if isinstance(m, list):
        m = {str(x): str(x) for x in m}
    if not isinstance(m, dict) or not m or not all(isinstance(k, str) and isinstance(v, str) for k, v in m.items()):
        raise SourceError(f"{ctx.where}.markers: expected a mapping {{keypoint: marker label in the file}} (default: "
                          f"the rig's keypoint names, when the config has keypoints), got {m!r}")
    out["markers"] = {k: v.split(":")[-1] for k, v in m.items()}
    if out["noise"] is not None and not (isinstance(out["noise"], (int, float)) and out["noise"] > 0):
        raise SourceError(f"{ctx.where}.noise: expected a number > 0 (m, 1 sigma), got {out['noise']!r}")
    _mocap_read(out, ctx)  # the file's columns, times and units are checked now, not after calibrating
    return out


def _mocap_probe(block: dict, ctx: SourceContext) -> tuple[int, float] | None:
    rec = _mocap_read(block, ctx)
    start, stop = _frames(ctx)
    traj = rec.trajectory(_name(ctx))
    n = (traj.num_frames if stop is None else min(stop, traj.num_frames)) - start
    return (n, rec.rate) if n > 0 else None


def _mocap_load(block: dict, ctx: SourceContext) -> Recording:
    rec = _mocap_read(block, ctx)
    start, stop = _frames(ctx)
    traj = rec.trajectory(_name(ctx))
    stop = traj.num_frames if stop is None else min(int(stop), traj.num_frames)
    traj = traj.slice(int(start), stop)
    traj = traj._with(steps=traj.steps - traj.steps[0], time=traj.time - traj.time[0],
                      meta={**dict(traj.meta), **({"noise": float(block["noise"])} if block.get("noise") else {})})
    warnings = [rec.report()] if any(rec.invalid.values()) else []
    return Recording(traj, rec.rate, warnings=warnings,
                     meta={"mocap": rec.source, "format": rec.format, "invalid_samples": dict(rec.invalid),
                           "frame": rec.frame})


def _empty(traj: Any, noise: Any) -> Any:
    """``traj`` with no rows: the kind, names, units and frame of a source's measurement (and its declared noise)."""
    return traj.slice(0, 0)._with(meta={"noise": float(noise)} if noise else {})


def _mocap_measurement(block: dict, ctx: SourceContext) -> Any:
    return _empty(_mocap_read(block, ctx).trajectory(_name(ctx)), block.get("noise"))


register_source(SourceKind(
    "mocap", _mocap_check, _mocap_load, _mocap_probe, "path", measurement=_mocap_measurement,
    keys=(("path", "path", "", "required", "Motion-capture export: OptiTrack Motive CSV, Vicon Nexus CSV, Qualisys "
           "TSV, a plain CSV/TSV or a C3D file (layouts: `vid2sid_ros/io/mocap.py`)."),
          ("markers", "mapping", "", None, "Keypoint -> marker label in the file (subject prefixes ignored); "
           "default: the rig's keypoint names."),
          ("format", "string", "", "auto", "auto, motive, vicon, qualisys, plain or c3d (auto: by the file's first "
           "lines, .c3d by suffix)."),
          ("unit", "string", "", None, "Length unit of the file (mm, cm, m); required for plain files, checked "
           "against the header of the others."),
          ("rate", "number", "Hz", None, "Sample rate when the file has no time column."),
          ("time_column", "string", "", None, "Time column of a plain file (default: time, t, timestamp)."),
          ("frame", "mapping", "", None, "Pose of the capture volume in the twin's world: up_axis (z | y, Motive is "
           "y), position [x, y, z] m, rpy [roll, pitch, yaw] rad."),
          ("noise", "number", "m", None, "This trial's marker noise (1 sigma) for weighting against other "
           "modalities (default 0.001 m)."),
          ("trial_column", "string", "", None, "Name of the ID column of a plain file that holds several trials; with "
           "trial_id, only this trial's rows are read (times start at its first row)."),
          ("trial_id", "string", "", None, "This trial's value in trial_column.")),
    doc="Motion-capture marker positions (3-D points, m)."))


# -- joint_csv ----------------------------------------------------------------------------------
JOINT_CSV_KEYS = {"path": None, "joints": None, "units": "rad", "commands": None, "time_column": None, "rate": None,
                  "noise": None}


#: parsed joint-state CSVs by (path, size, mtime, read options): a rig's check, probe, load, commands and
#: measurement each read the trial's file, which parses every cell in Python (a 1,000-row arm log: ~25 ms a read)
_JOINT_CACHE: dict[tuple, Any] = {}


def _joint_read(block: dict, ctx: SourceContext):
    """The trial's :class:`~.joint_csv.JointRecording` (a copy: callers may change it), parsed once per file
    version and read options (:data:`_JOINT_CACHE`, a few entries).

    Raises:
        SourceError: the file cannot be read as asked (the one-line :class:`~.joint_csv.JointCsvError`, prefixed
            with the rig config's field).
    """
    import copy

    from .joint_csv import JointCsvError, load_joint_csv

    key = None
    try:
        st = os.stat(block["path"])
        key = (os.path.realpath(block["path"]), st.st_size, st.st_mtime_ns, repr(block["joints"]),
               repr(block["units"]), repr(block["commands"]), block["time_column"], block["rate"])
    except (OSError, TypeError, ValueError):
        pass  # load_joint_csv says what is wrong with the path
    if key is not None and key in _JOINT_CACHE:
        return copy.deepcopy(_JOINT_CACHE[key])
    try:
        rec = load_joint_csv(block["path"], joints=block["joints"], units=block["units"], commands=block["commands"],
                             time_column=block["time_column"], rate=block["rate"])
    except JointCsvError as err:
        raise SourceError(f"{ctx.where}: {err}") from None
    if key is not None:
        while len(_JOINT_CACHE) >= 8:
            _JOINT_CACHE.pop(next(iter(_JOINT_CACHE)))
        _JOINT_CACHE[key] = copy.deepcopy(rec)
    return rec


def _joint_check(block: dict, ctx: SourceContext) -> dict:
    out = _path_block(block, JOINT_CSV_KEYS, ctx, "the joint-state CSV")
    if not out["joints"] or not isinstance(out["joints"], (dict, list)):
        raise SourceError(f"{ctx.where}.joints: expected a mapping {{column: joint}} or a list of columns, "
                          f"got {out['joints']!r}")
    if out["noise"] is not None and not (isinstance(out["noise"], (int, float)) and out["noise"] > 0):
        raise SourceError(f"{ctx.where}.noise: expected a number > 0 (rad or m, 1 sigma), got {out['noise']!r}")
    _joint_read(out, ctx)
    return out


def _joint_probe(block: dict, ctx: SourceContext) -> tuple[int, float] | None:
    rec = _joint_read(block, ctx)
    n = rec.trajectory(_name(ctx)).num_frames
    return (n, rec.rate) if n > 0 else None


def _joint_load(block: dict, ctx: SourceContext) -> Recording:
    rec = _joint_read(block, ctx)
    name = _name(ctx)
    traj = rec.trajectory(name)
    if block.get("noise"):
        traj = traj._with(meta={**dict(traj.meta), "noise": float(block["noise"])})
    warnings = [rec.report()] if any(rec.invalid.values()) else []
    return Recording(traj, rec.rate, excitation=rec.excitation(name), warnings=warnings,
                     meta={"joint_csv": rec.source, "invalid_samples": dict(rec.invalid)})


def _joint_commands(block: dict, ctx: SourceContext) -> Any:
    return _joint_read(block, ctx).excitation(_name(ctx))


def _joint_measurement(block: dict, ctx: SourceContext) -> Any:
    return _empty(_joint_read(block, ctx).trajectory(_name(ctx)), block.get("noise"))


register_source(SourceKind(
    "joint_csv", _joint_check, _joint_load, _joint_probe, "path", commands=_joint_commands,
    measurement=_joint_measurement,
    keys=(("path", "path", "", "required", "CSV (or TSV) with a header row: time + one column per joint "
           "(`vid2sid_ros/io/joint_csv.py`)."),
          ("joints", "mapping | list", "", "required", "Column -> model joint name (a list: column = joint)."),
          ("units", "string | mapping", "", "rad", "rad (revolute) or m (prismatic), for all or per column."),
          ("commands", "mapping | list", "", None, "Command columns -> actuator names: the trial's excitation."),
          ("time_column", "string", "", None, "Default: time, t, stamp or timestamp."),
          ("rate", "number", "Hz", None, "Command rate; required without a time column."),
          ("noise", "number", "rad", None, "This trial's joint noise (1 sigma; default 0.005 rad).")),
    doc="Joint positions (rad or m per joint) and optional commands."))


# -- bag ----------------------------------------------------------------------------------------
BAG_KEYS = {"path": None, "trial": None, "measurement": "image", "topics": None, "command_names": None,
            "actuators": None, "command_field": "position", "joints": None, "joint_units": None, "rate": None,
            "split": None, "names": None}
_BAG_CACHE: dict[tuple, list] = {}


def _bag_trials(block: dict, ctx: SourceContext, *, tracker_needed: bool = True) -> list:
    from .rosbag import BagError, check_bag_finished, load_bag_trials

    path = Path(block["path"])
    try:
        check_bag_finished(path)
    except BagError as err:
        raise SourceError(f"{ctx.where}.path: {err}") from None
    mt = max((p.stat().st_mtime_ns for p in ([path] + (list(path.iterdir()) if path.is_dir() else [])))
             , default=0)
    key = (str(path.resolve()), mt, repr(sorted((k, repr(v)) for k, v in block.items() if k not in ("trial",
                                                                                                  "measurement"))),
           bool(getattr(ctx, "keep_frames", False)))
    if key in _BAG_CACHE:
        return _BAG_CACHE[key]
    rig = getattr(ctx, "rig", None)
    try:
        if block.get("topics"):
            from .lab_bag import load_lab_bag, parse_lab_bag_config

            cfg = parse_lab_bag_config({k: v for k, v in block.items() if k not in ("trial", "measurement")
                                        and v is not None}, source=ctx.where)
            needs_tracker = "image" in cfg.topics
            tracker = None
            if needs_tracker and (rig is None or not getattr(rig, "tracker", None)):
                raise SourceError(f"{ctx.where}: the rig has no tracker configuration to track {cfg.topics['image']}")
            if needs_tracker:
                from ..perception import make_tracker

                tracker = make_tracker(rig.tracker)
            trials = load_lab_bag(cfg, tracker=tracker, keep_frames=bool(ctx.keep_frames))
        else:
            if rig is None or not getattr(rig, "tracker", None):
                raise SourceError(f"{ctx.where}: the rig has no tracker configuration to re-track the bag's camera")
            from ..perception import make_tracker

            trials = load_bag_trials(path, tracker=make_tracker(rig.tracker), keep_frames=bool(ctx.keep_frames))
    except BagError as err:
        raise SourceError(f"{ctx.where}: {err}") from None
    _BAG_CACHE.clear()  # one bag's frames in memory at a time
    _BAG_CACHE[key] = trials
    return trials


def _pick(trials: list, block: dict, ctx: SourceContext):
    return trials[_pick_index([t.excitation.name for t in trials], block, ctx)]


def _pick_index(names: list[str], block: dict, ctx: SourceContext) -> int:
    """Index of the block's ``trial`` among the bag's trial ``names``; SourceError naming the choices."""
    want = block.get("trial")
    if want is None:
        if len(names) == 1:
            return 0
        raise SourceError(f"{ctx.where}.trial: the bag holds {len(names)} trials ({', '.join(names)}); name one")
    if isinstance(want, int) and not isinstance(want, bool):
        if not 0 <= want < len(names):
            raise SourceError(f"{ctx.where}.trial: index {want} out of range; the bag holds {len(names)} trials")
        return want
    if want not in names:
        import difflib

        close = difflib.get_close_matches(str(want), names, n=1)
        raise SourceError(f"{ctx.where}.trial: no trial {want!r} in the bag" + (f" (did you mean {close[0]}?)"
                                                                                if close else "")
                          + f"; trials: {', '.join(names)}")
    return names.index(want)


def _bag_check(block: dict, ctx: SourceContext) -> dict:
    out = _path_block(block, BAG_KEYS, ctx, "the bag directory or its .mcap/.db3 file", resolve=_resolve_any)
    if out["measurement"] not in ("image", "joints"):
        raise SourceError(f"{ctx.where}.measurement: expected image or joints, got {out['measurement']!r}")
    if out["measurement"] == "joints" and not out.get("joints"):
        raise SourceError(f"{ctx.where}.joints: name the /joint_states joints to fit (measurement: joints)")
    if out["topics"] is not None:
        from .lab_bag import parse_lab_bag_config
        from .rosbag import BagError

        try:
            parse_lab_bag_config({k: v for k, v in out.items() if k not in ("trial", "measurement") and v is not None},
                                 source=ctx.where)
        except BagError as err:
            raise SourceError(str(err)) from None
    from .rosbag import BagError, bag_topics, check_bag_finished

    try:
        check_bag_finished(Path(out["path"]))
        present = bag_topics(out["path"])
    except BagError as err:
        raise SourceError(f"{ctx.where}.path: {err}") from None
    for key, topic in (out["topics"] or {}).items():
        if topic not in present:
            raise SourceError(f"{ctx.where}.topics.{key}: topic {topic} is not in the bag; it has: "
                              + ", ".join(sorted(present)))
    return out


def _bag_probe(block: dict, ctx: SourceContext) -> tuple[int, float] | None:
    t = _pick(_bag_trials(block, ctx), block, ctx)
    return t.excitation.num_steps, float(t.excitation.rate)


def _bag_load(block: dict, ctx: SourceContext) -> Recording:
    t = _pick(_bag_trials(block, ctx), block, ctx)
    name = _name(ctx)
    if block.get("measurement") == "joints":
        traj = t.extra.get("joints")
        if traj is None:
            raise SourceError(f"{ctx.where}.joints: no joint states read (map topics.joint_states)")
    else:
        traj = t.trajectory
        if traj.kind != "image":
            raise SourceError(f"{ctx.where}.topics.image: not mapped, so the bag has no image measurement")
    traj = traj._with(trial_id=name)
    exc = t.excitation
    frames = t.frames if ctx.keep_frames else None
    return Recording(traj, float(exc.rate), excitation=exc, frames=frames, warnings=list(t.warnings),
                     meta={"bag": str(block["path"]), "bag_trial": exc.name,
                           "dropped_frames": int(traj.meta.get("dropped_frames", 0)),
                           "camera_info": t.extra.get("camera_info"), "command_type": exc.meta.get("command_type")})


def _bag_commands(block: dict, ctx: SourceContext) -> Any:
    """The picked trial's commands, read from the bag's command topics only (no image decoded or tracked)."""
    from .lab_bag import LabBagConfig, lab_bag_commands, parse_lab_bag_config
    from .rosbag import DEFAULT_TOPICS, BagError, bag_topics, check_bag_finished, topic_in_bag

    path = Path(block["path"])
    try:
        check_bag_finished(path)
        if block.get("topics"):
            cfg = parse_lab_bag_config({k: v for k, v in block.items() if k not in ("trial", "measurement")
                                        and v is not None}, source=ctx.where)
        else:  # the package's own layout (recorder_node): ExcitationCommand split by trial id, trial ends
            present = bag_topics(path)
            topics = {"command": topic_in_bag(present, DEFAULT_TOPICS["excitation"])}
            if DEFAULT_TOPICS["trial_end"] in present:
                topics["trial_marker"] = DEFAULT_TOPICS["trial_end"]
            cfg = LabBagConfig(path, topics)
        excitations = lab_bag_commands(cfg)
    except BagError as err:
        raise SourceError(f"{ctx.where}: {err}") from None
    return excitations[_pick_index([e.name for e in excitations], block, ctx)]


def _bag_measurement(block: dict, ctx: SourceContext) -> Any:
    """Joint coordinates (``measurement: joints``: the named joints, rad unless ``joint_units`` says m), else None."""
    if block.get("measurement") != "joints":
        return None
    import numpy as np

    from ..core.trajectory import Trajectory

    joints = tuple(str(j) for j in block["joints"])
    units = tuple(str((block.get("joint_units") or {}).get(j, "rad")) for j in joints)
    return Trajectory(np.zeros(0), np.zeros((0, len(joints), 1)), np.zeros((0, len(joints)), bool), joints, "real",
                      _name(ctx), kind="joints", unit=units)


register_source(SourceKind(
    "bag", _bag_check, _bag_load, _bag_probe, "path", commands=_bag_commands, measurement=_bag_measurement,
    keys=(("path", "path", "", "required", "rosbag2 directory (or its .mcap/.db3): MCAP or sqlite3."),
          ("trial", "string | integer", "", None, "Which trial of the bag (name or index); required when it holds "
           "several."),
          ("measurement", "string", "", "image", "image (camera re-tracked, px) or joints (/joint_states, rad/m)."),
          ("topics", "mapping", "", None, "The lab's topic map: image (Image or CompressedImage), camera_info, "
           "joint_states, command (Float64MultiArray, JointTrajectory, JointState or ExcitationCommand), "
           "trial_marker; none = this package's own topics (`vid2sid_ros/io/lab_bag.py`)."),
          ("command_names", "list", "", None, "Float64MultiArray element names (the controller's joints)."),
          ("actuators", "mapping", "", None, "Command name -> twin actuator (default: same name)."),
          ("command_field", "string", "", "position", "position, velocity or effort (JointState/JointTrajectory)."),
          ("joints", "list", "", None, "JointState joints used as the joints measurement."),
          ("joint_units", "mapping", "", None, "Per joint rad (default) or m."),
          ("rate", "number", "Hz", None, "Command rate (default: median command interval)."),
          ("split", "mapping", "", None, "How a stream without trial ids splits: {gap_s: s}, {marker: true}, "
           "{windows: [[t0, t1], ...]} (s since the first command); default gaps of 5 periods."),
          ("names", "list", "", None, "Trial names in recording order (default trial_0, trial_1, ...).")),
    doc="A rosbag2 recording: the camera re-tracked (or joint states), its commands drive the twin."))
