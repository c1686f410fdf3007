"""rosbag2 (MCAP) recording and offline replay of a calibration, with the ``rosbags`` library.

Core module: no rclpy. The ROS nodes hand serialized CDR bytes
(``rclpy.serialization.serialize_message``) to :class:`BagWriter`, which writes them
unchanged; everything offline (``vid2sid calibrate --real BAG``, tests) reads bags with
:func:`read_messages` / :func:`load_real_trial_from_bag` without ROS.

Bags are rosbag2 version 9 with MCAP storage (``ros2 bag info`` and Foxglove read them).
The vid2sid_ros message definitions (``msg/*.msg``) are registered in the typestore so
each channel carries its full ``ros2msg`` schema; the standard types come from the
``rosbags`` ROS 2 Kilted typestore.

Topics of a calibration (see ``vid2sid_ros.nodes.graph.TOPICS``)::

    /vid2sid/excitation/command   vid2sid_ros/msg/ExcitationCommand   one per command step
    /vid2sid/excitation/trial_end vid2sid_ros/msg/ExcitationCommand   step = T, values empty
    /vid2sid/real/image_raw       sensor_msgs/msg/Image               camera (or stand-in rig)
    /vid2sid/sim/image_raw        sensor_msgs/msg/Image               twin renders
    /vid2sid/{real,sim}/camera_info sensor_msgs/msg/CameraInfo        beside each image, same stamp
    /vid2sid/{real,sim}/keypoints vid2sid_ros/msg/Keypoints
    /vid2sid/{real,sim}/trajectory vid2sid_ros/msg/Trajectory
    /vid2sid/parameter_update     vid2sid_ros/msg/ParameterUpdate

Bags recorded before the command topic moved under ``/vid2sid/excitation/`` hold the commands
on ``/vid2sid/excitation``: :data:`RENAMED_TOPICS` maps the old name, so they read and replay
unchanged (:func:`topic_in_bag`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from ..core.excitation import Excitation
from ..core.trajectory import Trajectory
from ..perception import rig_tracker, tracker_names

__all__ = [
    "BagError", "BagWriter", "BagMessage", "BagTrial", "VID2SID_MESSAGES", "DEFAULT_TOPICS",
    "find_interface_dir", "make_typestore", "read_messages", "bag_topics", "load_bag_trials",
    "load_real_trial_from_bag", "stamp_to_s", "rig_tracker", "tracker_names", "reset_tracker",
    "check_bag_finished", "bag_storage_files", "MCAP_MAGIC", "qos_profile", "check_topic_types",
    "RENAMED_TOPICS", "topic_in_bag",
]

#: the package's own message types, registered in the typestore from msg/*.msg
VID2SID_MESSAGES = ("ExcitationCommand", "Keypoints", "Trajectory", "ParameterUpdate")

#: default topic names of one calibration (the ROS graph's names)
DEFAULT_TOPICS = {
    "excitation": "/vid2sid/excitation/command",
    "trial_end": "/vid2sid/excitation/trial_end",
    "real_image": "/vid2sid/real/image_raw",
    "sim_image": "/vid2sid/sim/image_raw",
    "real_camera_info": "/vid2sid/real/camera_info",
    "sim_camera_info": "/vid2sid/sim/camera_info",
    "real_keypoints": "/vid2sid/real/keypoints",
    "sim_keypoints": "/vid2sid/sim/keypoints",
    "real_trajectory": "/vid2sid/real/trajectory",
    "sim_trajectory": "/vid2sid/sim/trajectory",
    "parameter_update": "/vid2sid/parameter_update",
}

#: topics renamed since bags were first recorded, ``{former name: current name}``: a bag holding
#: the former name and not the current one is read under the former name (:func:`topic_in_bag`)
RENAMED_TOPICS = {"/vid2sid/excitation": "/vid2sid/excitation/command"}

_EXCITATION_TYPE = "vid2sid_ros/msg/ExcitationCommand"


def topic_in_bag(present: Mapping[str, Any], topic: str) -> str:
    """The name under which a bag holds ``topic``: ``topic`` itself, or its former name
    (:data:`RENAMED_TOPICS`) when only that is in ``present`` (the bag's topics, e.g.
    :func:`bag_topics`)."""
    if topic not in present:
        for old, new in RENAMED_TOPICS.items():
            if new == topic and old in present:
                return old
    return topic
_IMAGE_TYPE = "sensor_msgs/msg/Image"


class BagError(ValueError):
    """A bag cannot be written or read as asked: names the bag, topic and what was expected."""


_QOS_DEFAULT = {"history": "keep_last", "depth": 10, "reliability": "reliable", "durability": "volatile",
                "liveliness": "automatic"}


def qos_profile(spec: Mapping[str, Any] | Any, *, where: str = "qos"):
    """A ``rosbags`` :class:`~rosbags.rosbag2.metadata.Qos` from a dict (enum names or numbers) or an
    rclpy ``QoSProfile`` (its ``history``, ``depth``, ``reliability``, ``durability`` ...).

    Raises:
        BagError: an unknown enum name (names ``where`` and the valid names).
    """
    from rosbags.rosbag2.metadata import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime

    if not isinstance(spec, Mapping):  # rclpy QoSProfile
        spec = {k: getattr(spec, k) for k in ("history", "depth", "reliability", "durability", "liveliness")
                if hasattr(spec, k)}
    d = {**_QOS_DEFAULT, **dict(spec)}

    def enum(cls, key):
        v = d[key]
        v = getattr(v, "value", v)
        if isinstance(v, int):
            return cls(v)
        name = str(v).upper().replace(" ", "_")
        if name not in cls.__members__:
            raise BagError(f"{where}: QoS {key} {v!r}; expected one of {', '.join(m.lower() for m in cls.__members__)}")
        return cls[name]

    never = QosTime(sec=0x7FFFFFFF, nsec=0xFFFFFFFF)
    return Qos(enum(QosHistory, "history"), int(d["depth"]), enum(QosReliability, "reliability"),
               enum(QosDurability, "durability"), never, never, enum(QosLiveliness, "liveliness"), never, False)


def stamp_to_s(stamp: Any) -> float:
    """builtin_interfaces/Time (``sec``, ``nanosec``) -> seconds (float)."""
    return float(stamp.sec) + 1e-9 * float(stamp.nanosec)


def find_interface_dir() -> Path:
    """Directory holding ``ExcitationCommand.msg`` etc.

    Looked up by :func:`vid2sid_ros.share.find_share_path` (checkout, then installs).

    Raises:
        BagError: if none holds the message files.
    """
    from ..share import find_share_path

    try:
        return find_share_path("msg", *(f"{n}.msg" for n in VID2SID_MESSAGES))
    except FileNotFoundError as err:
        raise BagError(str(err)) from None


def make_typestore(msg_dir: str | Path | None = None):
    """ROS 2 Kilted typestore (``rosbags``) with the vid2sid_ros messages registered.

    Args:
        msg_dir: directory of the ``.msg`` files; default :func:`find_interface_dir`.
    """
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    d = Path(msg_dir) if msg_dir is not None else find_interface_dir()
    types: dict = {}
    for n in VID2SID_MESSAGES:
        types.update(get_types_from_msg((d / f"{n}.msg").read_text(), f"vid2sid_ros/msg/{n}"))
    store.register(types)
    return store


def _channels_with_type_hash(storage: Any) -> None:
    """Make a ``rosbags`` MCAP storage write each channel's metadata the way rosbag2's MCAP
    storage plugin does: ``offered_qos_profiles`` *and* ``topic_type_hash`` (the type's
    ``RIHS01_<sha256>`` description hash, also in ``metadata.yaml``), which rosbag2 reads
    back from the channel (``rosbags`` itself writes only the QoS)."""
    from io import BytesIO

    from rosbags.rosbag2 import storage_mcap as sm

    def add_connection(connection: Any, offered_qos_profiles: str) -> None:
        meta = BytesIO()
        for key, value in (("offered_qos_profiles", offered_qos_profiles), ("topic_type_hash", connection.digest)):
            sm.write_string(meta, key)
            sm.write_string(meta, value)
        storage.channels.append(sm.Channel(connection.id, connection.msgtype, connection.topic,
                                           connection.ext.serialization_format, meta.getvalue()))
        storage.channel_stats[connection.id] = 0
        sm.write_channel(storage.chunk.bio, storage.channels[-1], storage.schemas)

    storage.add_connection = add_connection


class BagWriter:
    """Writes a rosbag2 (version 9, MCAP) bag message by message.

    Messages are appended as they come; MCAP chunks (1 MiB) go to disk as they fill, and
    :meth:`close` writes the summary and ``metadata.yaml`` (always call it: use the
    writer as a context manager, or close it from the node's shutdown path).

    Args:
        path: bag directory to create; must not exist.
        typestore: from :func:`make_typestore` (default: built here).
        compression: True for zstd chunk compression (MCAP "storage" compression, which
            ``ros2 bag`` and Foxglove read); False writes uncompressed chunks.
        storage: ``"mcap"`` (default) or ``"sqlite3"`` (``.db3``, rosbag2's older default).
        chunk_bytes: an MCAP chunk is closed and the file flushed to disk once this many
            (uncompressed) bytes are pending; :meth:`flush` does it on demand (the recorder at
            every trial end). Everything up to the last closed chunk survives a SIGKILL and is
            recovered by :func:`vid2sid_ros.io.bag_repair.repair_bag`.

    Raises:
        BagError: when ``path`` exists or cannot be created.
    """

    def __init__(self, path: str | Path, *, typestore=None, compression: bool = True, storage: str = "mcap",
                 chunk_bytes: int = 1 << 20) -> None:
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.rosbag2.enums import CompressionFormat, CompressionMode

        self.path = Path(path)
        if self.path.exists():
            raise BagError(f"bag {self.path} exists already; choose a new path (bags are never overwritten)")
        if storage not in ("mcap", "sqlite3"):
            raise BagError(f"bag {self.path}: storage must be 'mcap' or 'sqlite3', got {storage!r}")
        self.typestore = typestore if typestore is not None else make_typestore()
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        self._writer = Writer(self.path, version=9, storage_plugin=plugin)
        if compression and storage == "mcap":
            self._writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
        try:
            self._writer.open()
        except Exception as err:  # WriterError, OSError
            raise BagError(f"cannot create bag {self.path}: {err}") from None
        if storage == "mcap":
            _channels_with_type_hash(self._writer.storage)
        self.chunk_bytes = int(chunk_bytes)
        self._connections: dict[str, Any] = {}
        self._types: dict[str, str] = {}
        self.counts: dict[str, int] = {}
        self.closed = False

    def add_topic(self, topic: str, msgtype: str, qos: Sequence[Mapping[str, Any]] | None = None) -> None:
        """Declare ``topic`` with ROS type name ``msgtype`` (e.g. ``sensor_msgs/msg/Image``).

        The connection carries what ``ros2 bag record`` writes: the type's full definition,
        its type hash (``RIHS01_...``, computed by ``rosbags``) and the publishers' offered QoS
        profiles (``qos``: dicts with ``history``, ``depth``, ``reliability``, ``durability``
        as rclpy's enum names or values; default one profile ``keep_last 10, reliable, volatile``).

        Raises:
            BagError: unknown type, a malformed QoS profile, or the topic already declared
                with another type.
        """
        if topic in self._types:
            if self._types[topic] != msgtype:
                raise BagError(f"bag {self.path}: topic {topic} already recorded as {self._types[topic]}, "
                               f"got {msgtype}")
            return
        if msgtype not in self.typestore.fielddefs:
            raise BagError(f"bag {self.path}: message type {msgtype} of topic {topic} is not in the typestore")
        profiles = [qos_profile(q, where=f"bag {self.path}: topic {topic}") for q in (qos or [{}])]
        self._connections[topic] = self._writer.add_connection(topic, msgtype, typestore=self.typestore,
                                                               offered_qos_profiles=profiles)
        self._types[topic] = msgtype
        self.counts.setdefault(topic, 0)

    def write(self, topic: str, msgtype: str, data: bytes | memoryview, timestamp_ns: int) -> None:
        """Append one serialized (CDR) message received at ``timestamp_ns`` (ns since epoch).

        Raises:
            BagError: if the bag is closed or the topic/type is inconsistent.
        """
        if self.closed:
            raise BagError(f"bag {self.path} is closed")
        self.add_topic(topic, msgtype)
        self._writer.write(self._connections[topic], int(timestamp_ns), data)
        self.counts[topic] += 1
        chunk = getattr(getattr(self._writer, "storage", None), "chunk", None)
        if chunk is not None and chunk.bio.tell() >= self.chunk_bytes:
            self.flush()

    def flush(self) -> None:
        """Close the pending MCAP chunk and push the file to disk (``fsync``): everything written
        so far survives a crash. No-op for sqlite3 storage and for an empty chunk."""
        import os

        st = getattr(self._writer, "storage", None)
        if self.closed or st is None or not hasattr(st, "close_chunk"):
            return
        if st.chunk.msgs:
            st.close_chunk()
        st.bio.flush()
        os.fsync(st.bio.fileno())

    def write_object(self, topic: str, msgtype: str, msg: Any, timestamp_ns: int) -> None:
        """Serialize a rosbags typestore object to CDR and append it."""
        self.write(topic, msgtype, self.typestore.serialize_cdr(msg, msgtype), timestamp_ns)

    def close(self) -> None:
        """Finish the bag (summary, ``metadata.yaml``); idempotent."""
        if not self.closed:
            self.closed = True
            self._writer.close()

    def __enter__(self) -> "BagWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class BagMessage:
    """One deserialized bag message: topic, ROS type, log time (ns) and the message object."""

    topic: str
    msgtype: str
    timestamp_ns: int
    msg: Any
    rawdata: bytes = b""


MCAP_MAGIC = b"\x89MCAP0\r\n"


def bag_storage_files(path: str | Path) -> list[Path]:
    """The storage files (``*.mcap``, ``*.db3``) of a bag directory (or the file itself), sorted."""
    p = Path(path)
    if p.is_file():
        return [p]
    return sorted([*p.glob("*.mcap"), *p.glob("*.db3")]) if p.is_dir() else []


def check_bag_finished(path: str | Path) -> None:
    """Refuse a bag its recorder never closed (SIGKILL, power loss), naming the repair command.

    A finished rosbag2 MCAP bag has ``metadata.yaml`` and every ``.mcap`` file ends with the
    MCAP footer and magic; an unfinished one has neither (its completed chunks are intact:
    ``vid2sid bag repair BAG`` rebuilds the summary and ``metadata.yaml`` from them).

    Raises:
        BagError: missing bag, or an unfinished one (one line with the repair command).
    """
    p = Path(path)
    if not p.exists():
        raise BagError(f"bag not found: {p}")
    files = bag_storage_files(p)
    bag_dir = p if p.is_dir() else p.parent
    if not files:
        if p.is_dir() and (p / "metadata.yaml").is_file():
            return  # let the reader say what is wrong with it
        raise BagError(f"bag {p}: no .mcap or .db3 storage file")
    unfinished = []
    for f in files:
        if f.suffix == ".mcap":
            with f.open("rb") as fh:
                if fh.read(len(MCAP_MAGIC)) != MCAP_MAGIC:  # not a bag at all: repair cannot help
                    raise BagError(f"{f}: not an MCAP file (no MCAP magic at the start); expected a rosbag2 "
                                   "MCAP storage file")
                size = fh.seek(0, 2)
                fh.seek(max(size - len(MCAP_MAGIC), 0))
                if size < 2 * len(MCAP_MAGIC) or fh.read() != MCAP_MAGIC:
                    unfinished.append(f.name)
    if unfinished:
        raise BagError(f"bag {bag_dir} is unfinished (its recorder did not close it: {', '.join(unfinished)} has no "
                       f"MCAP summary/footer); recover its completed chunks with: vid2sid bag repair {p}")
    if p.is_dir() and not (p / "metadata.yaml").is_file():
        raise BagError(f"bag {p} has no metadata.yaml (its recorder did not close it); rebuild it with: "
                       f"vid2sid bag repair {p}")


def _open_reader(path: str | Path):
    from rosbags.rosbag2 import Reader

    p = Path(path)
    check_bag_finished(p)
    try:
        reader = Reader(p)
        reader.open()
    except Exception as err:  # ReaderError: missing/corrupt metadata or storage
        raise BagError(f"cannot open bag {p}: {err}") from None
    return reader


def bag_topics(path: str | Path) -> dict[str, tuple[str, int]]:
    """``{topic: (msgtype, message count)}`` of a bag.

    Raises:
        BagError: missing or unreadable bag.
    """
    reader = _open_reader(path)
    try:
        return {t: (info.msgtype, info.msgcount) for t, info in reader.topics.items()}
    finally:
        reader.close()


def check_topic_types(path: str | Path, present: Mapping[str, Any], expect_types: Mapping[str, str]) -> None:
    """Refuse a bag lacking a topic of ``expect_types`` or holding another type on it.

    Args:
        path: the bag (for messages). present: ``{topic: msgtype}`` or :func:`bag_topics`'s
            ``{topic: (msgtype, count)}``. expect_types: ``{topic: msgtype}``.

    Raises:
        BagError: one line naming the topic and the expected type (and what the bag has).
    """
    types = {t: (v[0] if isinstance(v, tuple) else v) for t, v in present.items()}
    for topic, want in expect_types.items():
        if topic not in types:
            raise BagError(f"bag {path}: topic {topic} ({want}) is missing; the bag has: "
                           + (", ".join(f"{t} ({m})" for t, m in sorted(types.items())) or "no topics"))
        if types[topic] != want:
            raise BagError(f"bag {path}: topic {topic} holds {types[topic]}, expected {want}")


def read_messages(path: str | Path, topics: Iterable[str] | None = None, *, typestore=None,
                  expect_types: dict[str, str] | None = None, keep_raw: bool = False) -> Iterator[BagMessage]:
    """Messages of a bag in log-time order, deserialized.

    Args:
        path: bag directory (or its ``.mcap``/``.db3`` file).
        topics: topics to read; default all.
        typestore: from :func:`make_typestore` (default: built here).
        expect_types: ``{topic: msgtype}`` that must be present with exactly that type.
        keep_raw: also return the CDR bytes (for republishing with rclpy).

    Raises:
        BagError: missing/unreadable bag, an expected topic absent (lists the topics the
            bag has), or a topic holding another message type than expected.
    """
    store = typestore if typestore is not None else make_typestore()
    reader = _open_reader(path)
    try:
        check_topic_types(path, {t: info.msgtype for t, info in reader.topics.items()}, expect_types or {})
        wanted = None if topics is None else set(topics)
        conns = [c for c in reader.connections if wanted is None or c.topic in wanted]
        for conn, t_ns, raw in reader.messages(connections=conns):
            try:
                msg = store.deserialize_cdr(raw, conn.msgtype)
            except Exception as err:
                raise BagError(f"bag {path}: cannot decode a {conn.msgtype} message on {conn.topic} "
                               f"at t={t_ns} ns: {err}") from None
            yield BagMessage(conn.topic, conn.msgtype, int(t_ns), msg, bytes(raw) if keep_raw else b"")
    finally:
        reader.close()


@dataclass
class BagTrial:
    """One real trial re-tracked from a bag.

    Attributes:
        trajectory: tracked real trajectory, one row per command step (lockstep pairing,
            dropped steps invalid); ``meta`` has dropped/duplicate/unmatched counts.
        excitation: the commanded excitation (values (T, A), rate = 1/period).
        command_stamps: stamp of each command step, shape (T,), s.
        image_stamps: stamp of each camera frame of the trial, shape (F,), s.
        frames: the decoded RGB frames (F, H, W, 3) uint8 when ``keep_frames``, else None.
        warnings: non-fatal problems (missing commands, missing or undecodable frames).
        extra: more measurements of the same trial and what the bag said about them
            (``joints``: a joint-state :class:`Trajectory`; ``camera_info``: size, K, D).
    """

    trajectory: Trajectory
    excitation: Excitation
    command_stamps: np.ndarray
    image_stamps: np.ndarray
    frames: np.ndarray | None = None
    warnings: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


def reset_tracker(tracker: Any) -> None:
    """Forget per-stream state (start of a trial), for trackers that keep any."""
    reset = getattr(tracker, "reset", None)
    if callable(reset):
        reset()


def load_bag_trials(path: str | Path, *, tracker: Any = None, rig: Any = None, trial_ids: Sequence[str] = (),
                    image_topic: str = DEFAULT_TOPICS["real_image"], command_topic: str = DEFAULT_TOPICS["excitation"],
                    trial_end_topic: str = DEFAULT_TOPICS["trial_end"], keep_frames: bool = False) -> list[BagTrial]:
    """Re-track the recorded real trials of a bag (camera images + commands), without ROS.

    Frames are paired with command steps by the lockstep rule of
    :mod:`vid2sid_ros.core.lockstep` (frame of step k captured at the end of period k) and
    tracked in recording order with the tracker reset at each trial start — what the
    tracker node does live — so a bag yields the trajectories the live graph published.

    The package's own topic names and types are a topic map over the lab-bag reader
    (:func:`vid2sid_ros.io.lab_bag.load_lab_bag`: ``command`` = ExcitationCommand split by
    ``trial_id``, ``image``, and the trial-end topic as ``trial_marker``, whose ``step``
    gives a trial's length when its last commands are missing); only the types are
    checked more strictly here (ExcitationCommand commands, ``sensor_msgs/Image`` frames).

    Args:
        path: rosbag2 directory.
        tracker: object with ``names``, ``detect(frame_rgb) -> (xy (K, 2), valid (K,))`` and
            ``reset()``, e.g. a :class:`~vid2sid_ros.perception.markers.MarkerTracker`;
            default: the tracker configured for ``rig``.
        rig: a :class:`~vid2sid_ros.sim.registry.Rig` or registry name (e.g. ``"finger"``) whose
            tracker configuration gives the default tracker.
        trial_ids: trials to load, in this order; empty = every trial in recording order.
        image_topic, command_topic, trial_end_topic: topic names in the bag (the trial-end
            topic is optional).
        keep_frames: also return the decoded frames (memory: F * H * W * 3 bytes).

    Returns:
        One :class:`BagTrial` per trial.

    Raises:
        BagError: missing bag, a missing topic or one of the wrong type, an unknown trial,
            or a trial without any frame.
        ValueError: neither ``tracker`` nor ``rig`` given.
    """
    from .lab_bag import LabBagConfig, load_lab_bag  # the one frame loop (lab_bag imports this module)

    if tracker is None and rig is None:
        raise ValueError("give a `tracker` (names, detect(frame), reset()) or a `rig` (a Rig: vid2sid_ros.rigs.load_rig)")
    present = bag_topics(path)
    command_topic = topic_in_bag(present, command_topic)
    expect = {command_topic: _EXCITATION_TYPE, image_topic: _IMAGE_TYPE}
    topics = {"command": command_topic, "image": image_topic}
    if trial_end_topic in present:
        expect[trial_end_topic] = _EXCITATION_TYPE
        topics["trial_marker"] = trial_end_topic
    check_topic_types(path, present, expect)
    if not present[command_topic][1]:
        raise BagError(f"bag {path}: no ExcitationCommand messages on {command_topic}")
    trials = {t.excitation.name: t for t in load_lab_bag(LabBagConfig(Path(path), topics), tracker=tracker, rig=rig,
                                                         keep_frames=keep_frames)}
    unknown = [t for t in trial_ids if t not in trials]
    if unknown:
        raise BagError(f"bag {path}: trial(s) {unknown} not found; trials in the bag: {', '.join(trials)}")
    return [trials[t] for t in (list(trial_ids) or trials)]


def load_real_trial_from_bag(path: str | Path, *, rig: Any = None, tracker: Any = None,
                             train: Sequence[str] = (), holdout: Sequence[str] = (), keep_frames: bool = False,
                             **topics: str):
    """A calibration :class:`~vid2sid_ros.core.trial.RealTrial` from a recorded bag.

    This is what ``vid2sid calibrate --real BAG`` needs: every real trial of the bag,
    re-tracked (:func:`load_bag_trials`), with its commanded excitation.

    Args:
        path: rosbag2 directory.
        rig: Rig or registry rig name (default tracker).
        tracker: explicit tracker (see :func:`load_bag_trials`).
        train: trial ids fitted; empty = every trial not in ``holdout``.
        holdout: trial ids only scored.
        keep_frames: keep the frames in ``RealTrial.frames`` (for proposers that watch video).
        topics: ``image_topic``, ``command_topic``, ``trial_end_topic`` overrides.

    Raises:
        BagError: see :func:`load_bag_trials`; also when no training trial is left.
    """
    from ..core.trial import RealTrial

    trials = {t.excitation.name: t for t in load_bag_trials(path, tracker=tracker, rig=rig,
                                                              trial_ids=tuple(train) + tuple(holdout),
                                                              keep_frames=keep_frames, **topics)}
    train_ids = list(train) or [t for t in trials if t not in set(holdout)]
    if not train_ids:
        raise BagError(f"bag {path}: no training trial left (holdout: {list(holdout)})")
    frames = {t: trials[t].frames for t in trials if trials[t].frames is not None}
    from ..perception.quality import check_trials, min_tracked_fraction

    used = [trials[t].trajectory for t in list(train_ids) + list(holdout)]
    tracking, tracked_warnings = check_trials(used, min_fraction=min_tracked_fraction(getattr(rig, "config", None)))
    return RealTrial([trials[t].trajectory for t in train_ids], [trials[t].excitation for t in train_ids],
                     [trials[t].trajectory for t in holdout], [trials[t].excitation for t in holdout],
                     frames=frames, source=f"bag {path}",
                     meta={"warnings": [w for t in trials.values() for w in t.warnings] + tracked_warnings,
                           "tracking": tracking,
                           "dropped_frames": {t: int(v.trajectory.meta["dropped_frames"]) for t, v in trials.items()}})
