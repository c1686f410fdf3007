"""Real trials from a lab's own rosbag2 (MCAP or sqlite3): its topic names, standard message types.

``ros2 bag record /camera/image_raw /camera/camera_info /joint_states
/forward_position_controller/commands`` is what a lab already has. :func:`load_lab_bag`
reads such a bag with a *topic map* (the ``bag`` source block of a rig config) and
returns one :class:`~vid2sid_ros.io.rosbag.BagTrial` per trial: the camera re-tracked
into image keypoints, the commands as the trial's excitation, and (optionally) the
recorded ``/joint_states`` as a second, joint-space measurement of the same trial.
No ROS needed (``rosbags`` reads both storage formats).

Config block (``trials[].source.bag`` / ``vid2sid calibrate`` ``real.bag``)::

    bag:
      path: lab_run.mcap              # bag directory, .mcap or .db3
      topics:
        image: /camera/image_raw      # sensor_msgs/Image or sensor_msgs/CompressedImage
        camera_info: /camera/camera_info   # optional sensor_msgs/CameraInfo (size checked, kept in meta)
        joint_states: /joint_states   # optional sensor_msgs/JointState measurement
        command: /forward_position_controller/commands
        trial_marker: /trial_end      # optional: one message ends a trial (any type; std_msgs/String data = name;
                                      #   an ExcitationCommand's step = the trial's length in steps)
      command_names: [flexor]         # Float64MultiArray element order (the controller's `joints` list)
      actuators: {flexor: flexor_motor}   # command name -> twin actuator (default: same name)
      command_field: position         # JointState / JointTrajectory targets: position | velocity | effort
      joints: [mcp, pip]              # joint names used as a measurement (sensor_msgs/JointState.position)
      joint_units: {slide: m}         # default rad
      rate: 30                        # command rate, Hz (default: median command interval)
      split: {gap_s: 0.5}             # or {marker: true} (topics.trial_marker), {windows: [[t0, t1], ...]}
                                      #   (windows: s since the first command)
      names: [step, chirp]            # trial names in order (default: trial_0, trial_1, ...)

Command types (the type is read from the bag and checked):

=================================  ==========================================  ==================
type                               values                                      time
=================================  ==========================================  ==================
``std_msgs/Float64MultiArray``     ``data`` in ``command_names`` order         receive time (no header)
``trajectory_msgs/JointTrajectory`` ``points[0].<field>s`` by ``joint_names``   header stamp (+ time_from_start)
``sensor_msgs/JointState``         ``<field>`` by ``name``                     header stamp
``vid2sid_ros/ExcitationCommand``  ``values`` (trial id, step and period kept)  header stamp
=================================  ==========================================  ==================

A zero header stamp falls back to the receive (log) time, and the trial's warnings say
so. Images, CameraInfo and JointState use header stamps (receive times when zero).
Trials: ExcitationCommand streams split by ``trial_id``; the others by ``split``
(default: a gap longer than 5 command periods). Windows are ``[start, stop]`` in s since
the first command (its header stamp, or receive time without one).

Frames missing from the camera stream are counted per trial (``trajectory.meta
["dropped_frames"]``) and reported in the trial's warnings (``"trial t: 30 of 60 frames
missing on /camera/image_raw"``) — never silent.

Errors (:class:`~vid2sid_ros.io.rosbag.BagError`) are one line naming the bag and the
topic: a mapped topic missing from the bag (lists what it has), a topic of the wrong
type, a JointState without a mapped joint, a Float64MultiArray of the wrong length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..core.excitation import Excitation
from ..core.lockstep import LockstepStream
from ..core.trajectory import Trajectory
from ..perception import rig_tracker, tracker_names
from .image_msg import ImageEncodingError, image_to_array
from .rosbag import BagError, BagTrial, bag_topics, make_typestore, read_messages, reset_tracker, stamp_to_s

__all__ = ["LabBagConfig", "load_lab_bag", "lab_bag_commands", "parse_lab_bag_config", "load_real_trial_from_lab_bag", "COMMAND_TYPES",
           "IMAGE_TYPES",
           "compressed_to_array"]

IMAGE_TYPES = ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage")
COMMAND_TYPES = ("std_msgs/msg/Float64MultiArray", "trajectory_msgs/msg/JointTrajectory",
                 "sensor_msgs/msg/JointState", "vid2sid_ros/msg/ExcitationCommand")
_CAMERA_INFO = "sensor_msgs/msg/CameraInfo"
_JOINT_STATE = "sensor_msgs/msg/JointState"
_KEYS = ("path", "topics", "command_names", "actuators", "command_field", "joints", "joint_units", "rate", "split",
         "names", "train", "holdout")
_TOPIC_KEYS = ("image", "camera_info", "joint_states", "command", "trial_marker")


@dataclass
class LabBagConfig:
    """A parsed ``bag`` source block (module docstring); every field validated."""

    path: Path
    topics: dict[str, str]
    command_names: tuple[str, ...] = ()
    actuators: dict[str, str] = field(default_factory=dict)
    command_field: str = "position"
    joints: tuple[str, ...] = ()
    joint_units: dict[str, str] = field(default_factory=dict)
    rate: float | None = None
    split: dict[str, Any] = field(default_factory=dict)
    names: tuple[str, ...] = ()
    train: tuple[str, ...] = ()
    holdout: tuple[str, ...] = ()


def parse_lab_bag_config(block: Mapping[str, Any], *, source: str = "bag", base: Path | None = None) -> LabBagConfig:
    """Validate a ``bag`` block; errors are ``source.key: expected X, got Y``.

    Args:
        block: the mapping.
        source: prefix of messages (``rig.yaml:trials[0].source.bag``).
        base: directory relative paths resolve against.

    Raises:
        BagError: unknown key, missing path/topics, malformed value.
    """
    if not isinstance(block, Mapping):
        raise BagError(f"{source}: expected a mapping with path and topics, got {type(block).__name__}")
    unknown = [k for k in block if k not in _KEYS]
    if unknown:
        raise BagError(f"{source}: unknown key(s) {unknown}; valid: {', '.join(_KEYS)}")
    if not block.get("path"):
        raise BagError(f"{source}.path: expected the bag directory or .mcap/.db3 file")
    p = Path(str(block["path"]))
    if not p.is_absolute() and base is not None:
        p = base / p
    topics = block.get("topics") or {}
    if not isinstance(topics, Mapping) or not topics:
        raise BagError(f"{source}.topics: expected a mapping {{image: ..., command: ...}}, got {topics!r}")
    bad = [k for k in topics if k not in _TOPIC_KEYS]
    if bad:
        raise BagError(f"{source}.topics: unknown key(s) {bad}; valid: {', '.join(_TOPIC_KEYS)}")
    for k, v in topics.items():
        if not isinstance(v, str) or not v.startswith("/"):
            raise BagError(f"{source}.topics.{k}: expected a topic name starting with '/', got {v!r}")
    if "image" not in topics and "joint_states" not in topics:
        raise BagError(f"{source}.topics: map at least one measurement topic (image or joint_states)")

    def names(key: str) -> tuple[str, ...]:
        v = block.get(key) or ()
        if isinstance(v, Mapping):
            v = list(v)
        if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
            raise BagError(f"{source}.{key}: expected a list of names, got {v!r}")
        return tuple(v)

    def mapping(key: str, allowed: Sequence[str] | None = None) -> dict[str, str]:
        v = block.get(key) or {}
        if not isinstance(v, Mapping) or not all(isinstance(a, str) and isinstance(b, str) for a, b in v.items()):
            raise BagError(f"{source}.{key}: expected a mapping of names, got {v!r}")
        if allowed is not None:
            wrong = {a: b for a, b in v.items() if b not in allowed}
            if wrong:
                raise BagError(f"{source}.{key}: {wrong} — expected one of {', '.join(allowed)}")
        return dict(v)

    field_ = block.get("command_field", "position")
    if field_ not in ("position", "velocity", "effort"):
        raise BagError(f"{source}.command_field: expected position, velocity or effort, got {field_!r}")
    rate = block.get("rate")
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0
                             or not math.isfinite(rate)):
        raise BagError(f"{source}.rate: expected a number > 0 (Hz), got {rate!r}")
    split = block.get("split") or {}
    if not isinstance(split, Mapping) or len(split) > 1 or (split and next(iter(split)) not in ("gap_s", "marker",
                                                                                                  "windows")):
        raise BagError(f"{source}.split: expected one of {{gap_s: s}}, {{marker: true}}, {{windows: [[t0, t1], ...]}}, "
                       f"got {split!r}")
    if "gap_s" in split and not (isinstance(split["gap_s"], (int, float)) and split["gap_s"] > 0):
        raise BagError(f"{source}.split.gap_s: expected a number > 0 (s), got {split['gap_s']!r}")
    if "marker" in split and "trial_marker" not in topics:
        raise BagError(f"{source}.split.marker: map topics.trial_marker to the topic that ends each trial")
    if "windows" in split:
        w = split["windows"]
        ok = isinstance(w, list) and w and all(isinstance(x, (list, tuple)) and len(x) == 2
                                                and all(isinstance(y, (int, float)) for y in x) and x[0] < x[1]
                                                for x in w)
        if not ok:
            raise BagError(f"{source}.split.windows: expected a list of [start, stop] s with start < stop, got {w!r}")
    return LabBagConfig(p, dict(topics), names("command_names"), mapping("actuators"), field_, names("joints"),
                        mapping("joint_units", ("rad", "m")), None if rate is None else float(rate), dict(split),
                        names("names"), names("train"), names("holdout"))


def compressed_to_array(msg: Any) -> np.ndarray:
    """Decode a ``sensor_msgs/CompressedImage`` (JPEG/PNG, image_transport ``compressed``) to RGB (H, W, 3) uint8.

    Raises:
        ImageEncodingError: ``compressedDepth`` or undecodable data (names the format).
    """
    import cv2

    fmt = str(msg.format)
    if "compresseddepth" in fmt.lower().replace(" ", ""):
        raise ImageEncodingError(f"CompressedImage format {fmt!r} (compressedDepth) is a depth image, not a colour one")
    buf = np.frombuffer(bytes(msg.data), np.uint8)
    bgr = cv2.imdecode(buf, cv2.IMREAD_COLOR) if buf.size else None
    if bgr is None:
        raise ImageEncodingError(f"CompressedImage ({fmt!r}, {buf.size} bytes) cannot be decoded as JPEG/PNG")
    # image_transport writes "<encoding>; jpeg compressed <encoding>": a bgr8/rgb8 source decodes to BGR either way
    return np.ascontiguousarray(bgr[..., ::-1])


def _stamp(msg: Any, t_ns: int) -> tuple[float, bool]:
    """Header stamp in s, or the receive time when the stamp is zero; second value True when stamped."""
    h = getattr(msg, "header", None)
    if h is not None:
        s = stamp_to_s(h.stamp)
        if s > 0:
            return s, True
    return t_ns * 1e-9, False


@dataclass
class _Command:
    t: float
    values: np.ndarray
    stamped: bool
    trial: str | None = None
    step: int | None = None
    period: float | None = None
    names: tuple[str, ...] = ()


def _decode_command(m, cfg: LabBagConfig, path: Path) -> _Command:
    topic, msg = m.topic, m.msg
    if m.msgtype == "std_msgs/msg/Float64MultiArray":
        data = np.asarray(msg.data, float)
        if cfg.command_names and data.size != len(cfg.command_names):
            raise BagError(f"bag {path}: topic {topic}: Float64MultiArray holds {data.size} values, expected "
                           f"{len(cfg.command_names)} (command_names {list(cfg.command_names)})")
        return _Command(m.timestamp_ns * 1e-9, data, False)
    if m.msgtype == "vid2sid_ros/msg/ExcitationCommand":
        t, ok = _stamp(msg, m.timestamp_ns)
        return _Command(t, np.asarray(msg.values, float), ok, str(msg.trial_id), int(msg.step), float(msg.period),
                        tuple(msg.actuator_names))
    attr = {"position": "position", "velocity": "velocity", "effort": "effort"}[cfg.command_field]
    if m.msgtype == "trajectory_msgs/msg/JointTrajectory":
        if not msg.points:
            raise BagError(f"bag {path}: topic {topic}: a JointTrajectory without points")
        pt = msg.points[0]
        vals = np.asarray(getattr(pt, attr + "s"), float)
        names = tuple(msg.joint_names)
        t, ok = _stamp(msg, m.timestamp_ns)
        t += stamp_to_s(pt.time_from_start) if ok else 0.0
    else:  # JointState targets
        vals = np.asarray(getattr(msg, attr), float)
        names = tuple(msg.name)
        t, ok = _stamp(msg, m.timestamp_ns)
    if vals.size != len(names):
        raise BagError(f"bag {path}: topic {topic}: {len(names)} joint names but {vals.size} {attr} values")
    want = cfg.command_names or names
    missing = [n for n in want if n not in names]
    if missing:
        raise BagError(f"bag {path}: topic {topic}: command joint(s) {missing} not in the message's names "
                       f"{list(names)}")
    return _Command(t, np.asarray([vals[names.index(n)] for n in want]), ok, names=tuple(want))


def _split(cmds: list[_Command], cfg: LabBagConfig, markers: list[tuple[float, str]], t_first: float,
           path: Path) -> list[tuple[str, list[_Command]]]:
    if cmds and cmds[0].trial is not None:
        by: dict[str, list[_Command]] = {}
        for c in cmds:
            by.setdefault(c.trial, []).append(c)
        return [(k, sorted(v, key=lambda c: c.step)) for k, v in by.items()]
    groups: list[list[_Command]] = []
    labels: list[str | None] = []
    if "windows" in cfg.split:
        for t0, t1 in cfg.split["windows"]:
            groups.append([c for c in cmds if t0 <= c.t - t_first <= t1])
            labels.append(None)
    elif "marker" in cfg.split:
        ends = sorted(markers)
        start = -math.inf
        for t_end, label in ends:
            groups.append([c for c in cmds if start < c.t <= t_end])
            labels.append(label or None)
            start = t_end
        rest = [c for c in cmds if c.t > start]
        if rest:
            groups.append(rest)
            labels.append(None)
    else:
        dts = np.diff([c.t for c in cmds])
        period = 1.0 / cfg.rate if cfg.rate else (float(np.median(dts)) if dts.size else 1.0)
        gap = float(cfg.split.get("gap_s", 5 * period))
        cur = [cmds[0]] if cmds else []
        for a, b in zip(cmds, cmds[1:]):
            if b.t - a.t > gap:
                groups.append(cur)
                labels.append(None)
                cur = []
            cur.append(b)
        if cur:
            groups.append(cur)
            labels.append(None)
    groups_l = [(lab, g) for lab, g in zip(labels, groups) if g]
    if cfg.names and len(cfg.names) != len(groups_l):
        raise BagError(f"bag {path}: {len(groups_l)} trials found in {cfg.topics.get('command')} but "
                       f"{len(cfg.names)} names given ({list(cfg.names)})")
    out = []
    for i, (lab, g) in enumerate(groups_l):
        name = cfg.names[i] if cfg.names else (lab or f"trial_{i}")
        out.append((name, g))
    return out


def load_lab_bag(cfg: LabBagConfig | Mapping[str, Any], *, tracker: Any = None, rig: Any = None,
                 keep_frames: bool = False, source: str = "bag") -> list[BagTrial]:
    """Real trials of a lab bag (module docstring).

    Args:
        cfg: a :class:`LabBagConfig` or the raw block (parsed by :func:`parse_lab_bag_config`).
        tracker: image tracker (``names``, ``detect``, ``reset``); default the rig's.
        rig: Rig or registry name giving the default tracker (only needed with an image topic).
        keep_frames: keep the decoded frames.
        source: message prefix for a raw block.

    Returns:
        One :class:`BagTrial` per trial, in recording order; ``trajectory`` is the image
        trajectory (or the joint one without an image topic), ``joints`` trajectories are in
        ``BagTrial.extra["joints"]``; ``warnings`` name missing frames, receive-time
        fallbacks and held commands.

    Raises:
        BagError: one line naming the bag and topic (module docstring).
    """
    if not isinstance(cfg, LabBagConfig):
        cfg = parse_lab_bag_config(cfg, source=source)
    path = cfg.path
    present = _checked_topics(cfg, path)
    img_topic = cfg.topics.get("image")
    if img_topic is not None and tracker is None:
        if rig is None:
            raise ValueError("give a `tracker` or a `rig` to re-track the camera topic")
        tracker = rig_tracker(rig)[0]
    rec = _read_recording(cfg, path)
    cmds = rec.cmds
    t_first = cmds[0].t  # windows count from the first command (stamp or receive time, as the commands')
    ctype = present[cfg.topics["command"]][0]
    warnings: list[str] = []
    if not all(c.stamped for c in cmds):
        why = "has no header" if ctype == "std_msgs/msg/Float64MultiArray" else "has zero header stamps"
        warnings.append(f"{cfg.topics['command']} ({ctype.split('/')[-1]}) {why}: command times are the bag's "
                        "receive times")
    if rec.images and not all(ok for _, ok, _, _ in rec.images):
        warnings.append(f"{img_topic}: zero header stamps; frame times are the bag's receive times")
    cam_meta = None
    if rec.info is not None:
        info = rec.info
        cam_meta = {"width": int(info.width), "height": int(info.height), "k": [float(x) for x in info.k],
                    "d": [float(x) for x in info.d], "distortion_model": str(info.distortion_model),
                    "frame_id": str(info.header.frame_id)}
    names = tracker_names(tracker) if tracker is not None else ()
    out = []
    for tid, group in _split(cmds, cfg, rec.markers, t_first, path):
        tw = list(warnings)
        exc, stamps, period = _trial_excitation(tid, group, cfg, rec, ctype, path, tw)
        extra: dict[str, Any] = {"camera_info": cam_meta}
        traj = None
        image_stamps: list[float] = []
        kept: list[np.ndarray] = []
        if img_topic is not None:
            traj, image_stamps, kept = _track_trial(rec.images, tracker, names, cfg, tid, stamps, period, cam_meta,
                                                    keep_frames, path, tw)
        if cfg.joints:
            extra["joints"] = _joint_trajectory(rec.jstates, cfg, tid, stamps, period, path, tw)
            if traj is None:
                traj = extra["joints"]
        elif traj is None:
            raise BagError(f"bag {path}: topics.joint_states is mapped but no joints are named; give joints: [...]")
        out.append(BagTrial(traj, exc, stamps, np.asarray(image_stamps), np.stack(kept) if kept else None, tw, extra))
    return out


def _trial_excitation(tid: str, group: list[_Command], cfg: LabBagConfig, rec: "_Recording", ctype: str, path: Path,
                      warnings: list[str]) -> tuple[Excitation, np.ndarray, float]:
    """One trial's commands on their time grid: (excitation, command stamps (T,) s, command period s)."""
    period = _command_period(group, cfg, tid, path)
    values, stamps = _command_grid(group, tid, period, rec.end_steps, cfg.topics["command"], warnings)
    cmd_names = group[0].names or cfg.command_names or tuple(f"u{i}" for i in range(values.shape[1]))
    actuators = tuple(cfg.actuators.get(n, n) for n in cmd_names)
    exc = Excitation(tid, 1.0 / period, values, actuators, meta={"source": f"bag:{path}", "command_type": ctype})
    return exc, stamps, period


def lab_bag_commands(cfg: LabBagConfig | Mapping[str, Any], *, source: str = "bag") -> list[Excitation]:
    """The trials' commands of a lab bag, as :func:`load_lab_bag` gives them (``BagTrial.excitation``), read
    from the command and trial-marker topics only (no image is decoded or tracked, no joint state read).

    Args:
        cfg: a :class:`LabBagConfig` or the raw block; only ``topics.command`` / ``topics.trial_marker`` and
            the command options (names, actuators, field, rate, split, names) are used.
        source: message prefix for a raw block.

    Returns:
        One excitation per trial (T rows at the command rate, actuator units), in recording order.

    Raises:
        BagError: a missing or mistyped command topic, no command message, a bad split.
    """
    if not isinstance(cfg, LabBagConfig):
        cfg = parse_lab_bag_config(cfg, source=source)
    cfg = replace(cfg, topics={k: v for k, v in cfg.topics.items() if k in ("command", "trial_marker")})
    path = cfg.path
    present = _checked_topics(cfg, path)
    rec = _read_recording(cfg, path)
    ctype = present[cfg.topics["command"]][0]
    return [_trial_excitation(tid, group, cfg, rec, ctype, path, [])[0]
            for tid, group in _split(rec.cmds, cfg, rec.markers, rec.cmds[0].t, path)]


def _checked_topics(cfg: LabBagConfig, path: Path) -> dict[str, tuple[str, int]]:
    """The bag's topics (``bag_topics``) once each mapped topic is there with an accepted type, else BagError."""
    present = bag_topics(path)
    for key, topic in cfg.topics.items():
        if topic not in present:
            have = ", ".join(f"{t} ({m.split('/')[-1]})" for t, (m, _) in sorted(present.items())) or "no topics"
            raise BagError(f"bag {path}: topic {topic} (topics.{key}) is missing; the bag has: {have}")
    allowed = {"image": IMAGE_TYPES, "camera_info": (_CAMERA_INFO,), "joint_states": (_JOINT_STATE,),
               "command": COMMAND_TYPES}
    for key, topic in cfg.topics.items():
        if key in allowed and present[topic][0] not in allowed[key]:
            raise BagError(f"bag {path}: topic {topic} (topics.{key}) holds {present[topic][0]}, expected "
                           + " or ".join(allowed[key]))
    if "command" not in cfg.topics:
        raise BagError(f"bag {path}: map topics.command to the commands the robot received (they drive the twin)")
    return present


@dataclass
class _Recording:
    """The mapped topics' messages of one bag, decoded: commands sorted by time (s), the rest in bag order."""

    cmds: list[_Command]
    images: list[tuple[float, bool, Any, str]]  # (t s, header-stamped, message, message type)
    jstates: list[tuple[float, Any]]  # (t s, JointState)
    markers: list[tuple[float, str]]  # (t s, trial name)
    end_steps: dict[str, int]  # ExcitationCommand trial ends (step = the trial's length)
    info: Any  # the first CameraInfo, or None


def _read_recording(cfg: LabBagConfig, path: Path) -> _Recording:
    """One pass over the bag's mapped topics; BagError when the command topic holds no message."""
    store = make_typestore()
    by_topic = {v: k for k, v in cfg.topics.items()}
    rec = _Recording([], [], [], [], {}, None)
    for m in read_messages(path, list(cfg.topics.values()), typestore=store):
        key = by_topic[m.topic]
        if key == "command":
            rec.cmds.append(_decode_command(m, cfg, path))
        elif key == "image":
            t, ok = _stamp(m.msg, m.timestamp_ns)
            rec.images.append((t, ok, m.msg, m.msgtype))
        elif key == "joint_states":
            t, _ = _stamp(m.msg, m.timestamp_ns)
            rec.jstates.append((t, m.msg))
        elif key == "camera_info" and rec.info is None:
            rec.info = m.msg
        elif key == "trial_marker":
            t, _ = _stamp(m.msg, m.timestamp_ns)
            rec.markers.append((t, str(getattr(m.msg, "data", "") or getattr(m.msg, "trial_id", ""))))
            if m.msgtype == "vid2sid_ros/msg/ExcitationCommand":
                tid = str(m.msg.trial_id)
                rec.end_steps[tid] = max(rec.end_steps.get(tid, 0), int(m.msg.step))
    if not rec.cmds:
        raise BagError(f"bag {path}: no message on {cfg.topics['command']}")
    rec.cmds.sort(key=lambda c: c.t)
    return rec


def _command_period(group: list[_Command], cfg: LabBagConfig, tid: str, path: Path) -> float:
    """A trial's command period in s: the message's own, else ``rate``, else the median command interval."""
    if group[0].period:
        return float(group[0].period)
    if cfg.rate:
        return 1.0 / cfg.rate
    dts = np.diff([c.t for c in group])
    if not dts.size:
        raise BagError(f"bag {path}: trial {tid!r} has one command; give rate: <Hz>")
    return float(np.median(dts))


def _command_grid(group: list[_Command], tid: str, period: float, end_steps: dict[str, int], topic: str,
                  warnings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """A trial's commands on its step grid: values (T, A), each step's command time (T,) s (NaN when missing).

    A missing step holds the previous command (0 at step 0), and ``warnings`` says how many.
    """
    steps = ([int(c.step) for c in group] if group[0].step is not None
             else [int(round((c.t - group[0].t) / period)) for c in group])
    T = max(steps) + 1
    if group[0].step is not None:  # commands missing at the end of a trial: its trial-end marker says
        T = max(T, end_steps.get(tid, 0))
    A = group[0].values.size
    values = np.full((T, A), np.nan)
    stamps = np.full(T, np.nan)
    for k, c in zip(steps, group):
        values[k] = c.values
        stamps[k] = c.t
    held = np.flatnonzero(np.isnan(values).any(axis=1))
    if held.size:
        warnings.append(f"trial {tid}: commands of {held.size} of {T} steps missing from {topic}; "
                        "held the previous one")
        for k in held:
            values[k] = values[k - 1] if k > 0 else 0.0
    return values, stamps


def _track_trial(images: list[tuple[float, bool, Any, str]], tracker: Any, names: Sequence[str], cfg: LabBagConfig,
                 tid: str, stamps: np.ndarray, period: float, cam_meta: dict[str, Any] | None, keep_frames: bool,
                 path: Path, warnings: list[str]) -> tuple[Trajectory, list[float], list[np.ndarray]]:
    """The trial's frames re-tracked in lockstep with its commands: (image trajectory, frame times s, kept frames)."""
    img_topic = cfg.topics["image"]
    T = stamps.size
    t_lo, t_hi = float(np.nanmin(stamps)) + 0.5 * period, float(np.nanmax(stamps)) + 1.5 * period
    stream = LockstepStream(tid, "real", names, period)
    for k in range(T):
        if np.isfinite(stamps[k]):
            stream.add_command(k, stamps[k])
    reset_tracker(tracker)
    image_stamps: list[float] = []
    kept: list[np.ndarray] = []
    for t, _, msg, mtype in images:
        if not (t_lo <= t <= t_hi):
            continue
        try:
            rgb = (compressed_to_array(msg) if mtype == "sensor_msgs/msg/CompressedImage"
                   else image_to_array(msg, "rgb8"))
        except ImageEncodingError as err:
            warnings.append(f"trial {tid}: frame at t={t:.3f} s skipped: {err}")
            continue
        if cam_meta and (rgb.shape[1], rgb.shape[0]) != (cam_meta["width"], cam_meta["height"]):
            raise BagError(f"bag {path}: topic {img_topic}: frames are {rgb.shape[1]}x{rgb.shape[0]} but "
                           f"{cfg.topics['camera_info']} says {cam_meta['width']}x{cam_meta['height']}")
        xy, valid = tracker.detect(rgb)
        stream.add_frame(t, xy, valid)
        image_stamps.append(t)
        if keep_frames:
            kept.append(rgb)
    if not image_stamps:
        raise BagError(f"bag {path}: no {img_topic} frame falls within trial {tid!r}")
    traj = stream.trajectory(T)
    dropped = int(traj.meta["dropped_frames"])
    if dropped:
        warnings.append(f"trial {tid}: {dropped} of {T} frames missing on {img_topic}")
    return traj, image_stamps, kept


def _joint_trajectory(jstates, cfg: LabBagConfig, tid: str, stamps: np.ndarray, period: float, path: Path,
                      warnings: list[str]) -> Trajectory:
    """Joint positions sampled at the end of each command period (nearest message within half a period)."""
    topic = cfg.topics.get("joint_states")
    if topic is None:
        raise BagError(f"bag {path}: joints {list(cfg.joints)} named but topics.joint_states is not mapped")
    T = stamps.size
    q = np.full((T, len(cfg.joints)), np.nan)
    if jstates:
        names0 = tuple(jstates[0][1].name)
        missing = [j for j in cfg.joints if j not in names0]
        if missing:
            raise BagError(f"bag {path}: topic {topic}: joint(s) {missing} not in the JointState names {list(names0)}")
        times = np.array([t for t, _ in jstates])
        k0 = np.flatnonzero(np.isfinite(stamps))[0]
        grid = stamps[k0] + (np.arange(T) - k0 + 1) * period  # end of each period, on step 0's grid
        for k in range(T):
            i = int(np.argmin(np.abs(times - grid[k])))
            if abs(times[i] - grid[k]) <= 0.5 * period:
                msg = jstates[i][1]
                nm = tuple(msg.name)
                pos = np.asarray(msg.position, float)
                if all(j in nm for j in cfg.joints) and pos.size == len(nm):
                    q[k] = [pos[nm.index(j)] for j in cfg.joints]
    n_bad = int(np.isnan(q).any(axis=1).sum())
    if n_bad:
        warnings.append(f"trial {tid}: {n_bad} of {T} joint-state samples missing on {topic}")
    units = tuple(cfg.joint_units.get(j, "rad") for j in cfg.joints)
    return Trajectory((np.arange(T) + 1) * period, q[:, :, None], np.isfinite(q), cfg.joints, "real", tid,
                      np.arange(T), {"source": f"bag:{path}", "missing_samples": n_bad}, kind="joints", unit=units)


def _real_trial_class():
    from ..core.trial import RealTrial

    return RealTrial


def load_real_trial_from_lab_bag(cfg: LabBagConfig | Mapping[str, Any], *, rig: Any = None, tracker: Any = None,
                                 keep_frames: bool = False, source: str = "bag",
                                 measurements: Sequence[str] = ("image",)):
    """A calibration ``RealTrial`` from a lab bag.

    Args:
        cfg: the ``bag`` block (``train``/``holdout`` name trials; default: all trained).
        rig, tracker: see :func:`load_lab_bag`.
        keep_frames: keep frames in ``RealTrial.frames``.
        measurements: which measurements of each trial are fitted: ``"image"`` (camera
            keypoints, px) and/or ``"joints"`` (``joints`` from ``/joint_states``, rad/m);
            both = the two modalities fitted together, weighted by their noise levels.

    Raises:
        BagError: see :func:`load_lab_bag`; an unknown trial name; no training trial;
            ``"joints"`` asked without ``joints`` in the block.
    """
    if not isinstance(cfg, LabBagConfig):
        cfg = parse_lab_bag_config(cfg, source=source)
    bad = [m for m in measurements if m not in ("image", "joints")]
    if bad or not measurements:
        raise BagError(f"{source}: measurements must be image and/or joints, got {list(measurements)}")
    if "joints" in measurements and not cfg.joints:
        raise BagError(f"{source}.joints: name the joints to fit (measurements include joints)")
    trials = {t.excitation.name: t for t in load_lab_bag(cfg, tracker=tracker, rig=rig, keep_frames=keep_frames)}
    unknown = [n for n in cfg.train + cfg.holdout if n not in trials]
    if unknown:
        raise BagError(f"bag {cfg.path}: trial(s) {unknown} not found; trials in the bag: {', '.join(trials)}")
    train = list(cfg.train) or [t for t in trials if t not in set(cfg.holdout)]
    if not train:
        raise BagError(f"bag {cfg.path}: no training trial left (holdout: {list(cfg.holdout)})")

    def pack(ids):
        trajs, excs = [], []
        for i in ids:
            t = trials[i]
            for m in measurements:
                traj = t.extra["joints"] if m == "joints" else t.trajectory
                if m == "image" and traj.kind != "image":
                    raise BagError(f"{source}.topics.image: not mapped, so no image measurement of trial {i!r}")
                trajs.append(traj)
                excs.append(t.excitation)
        return trajs, excs

    tr, te = pack(train)
    ho, he = pack(cfg.holdout)
    RealTrial = _real_trial_class()
    from ..perception.quality import check_trials, min_tracked_fraction

    tracking, tracked_warnings = check_trials(tr + ho, min_fraction=min_tracked_fraction(getattr(rig, "config", None)))
    return RealTrial(tr, te, ho, he, frames={i: t.frames for i, t in trials.items() if t.frames is not None},
                     source=f"bag {cfg.path}",
                     meta={"warnings": list(dict.fromkeys(w for t in trials.values() for w in t.warnings))
                           + tracked_warnings, "tracking": tracking,
                           "dropped_frames": {i: int(t.trajectory.meta.get("dropped_frames", 0))
                                              for i, t in trials.items()},
                           "camera_info": next((t.extra.get("camera_info") for t in trials.values()), None)})
