"""tracker_node: keypoints and whole-trial trajectories of the real and the sim image streams.

Subscribes ``/vid2sid/real/image_raw`` and ``/vid2sid/sim/image_raw`` plus the command
stream (``/vid2sid/excitation/command``, ``/vid2sid/excitation/trial_end``). Image callbacks
only enqueue the serialized message (``raw`` subscriptions: no conversion of the pixels
to a Python message on the spin thread); a worker thread deserializes it, decodes the
pixels without a copy and detects the keypoints (the rig's tracker, e.g.
:class:`~vid2sid_ros.perception.markers.MarkerTracker`), so the spin thread never does
image work. The queue is bounded and drops the OLDEST frame when full (camera_calibration's
BufferQueue); a dropped frame shows up as a dropped step, never as a shifted one.

Per frame: ``/vid2sid/{real,sim}/keypoints`` (Keypoints with trial id and step) and the
same points as ``/vid2sid/{real,sim}/image_markers`` (visualization_msgs/ImageMarker,
stamped like the image: Foxglove's and RViz's image panels draw them over the frames).
Per trial, once both streams hold a frame for every step, or at the latest ``trial_grace``
seconds after its trial-end notice:
``/vid2sid/{real,sim}/trajectory`` (Trajectory, one row per command step, with
``dropped_frames`` / ``late_frames``). Frames are paired with steps by the lockstep rule
of :mod:`vid2sid_ros.core.lockstep` (frame of step k = the one stamped nearest the end of
command period k).

Timing: a frame *reaches the tracker* when its image callback queues it (before
detection). Its delay is that time minus its capture target ``t_k + p`` (command stamp
plus period); it is *late* when the delay exceeds ``late_tolerance`` (default one
period), i.e. it arrived after the next frame should have been captured. Late frames are
still used and paired by stamp, never shifted. :attr:`TrackerNode.receipt_delays` keeps
every frame's arrival time minus its own header stamp, per trial and stream (s).
"""

from __future__ import annotations

import bisect
import threading
import time
from dataclasses import dataclass, field

import numpy as np
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import Image

from ..core.lockstep import LockstepStream, assign_steps
from ..core.trajectory import Trajectory
from ..io.image_msg import ImageEncodingError, image_to_array
from ..io.rosbag import reset_tracker, rig_tracker, tracker_names
from .common import BufferQueue, create_qos_subscription, qos_params, qos_profile, ExcitationCommand, Keypoints, TrajectoryMsg, run_node, \
    create_stream_publisher, image_marker_msg, keypoints_msg, resolve_rig, s_from_stamp, trajectory_to_msg
from .graph import TOPICS
from .params import RIG_CONFIG, Param, declare, values

__all__ = ["TrackerNode", "IndexedLockstepStream", "PARAMS", "make_node", "main"]

PARAMS = [
    Param("rig", "finger", "built-in rig name whose tracker configuration is used (or set rig_config)", read_only=True),
    RIG_CONFIG,
    Param("queue_size", 240, "frames buffered for the detector before the oldest is dropped", "frames", 1, 100000,
          read_only=True),
    Param("late_tolerance", 0.0, "a frame received later than this after its step's capture time is counted late; "
          "0 = one command period", "s", 0.0, 60.0),
    Param("trial_grace", 2.0, "longest wait after the trial-end notice for frames still in flight; the "
          "trajectories are published as soon as both streams hold every step", "s", 0.0, 60.0),
] + qos_params(("images", "streams", "results"))


class IndexedLockstepStream(LockstepStream):
    """:class:`~vid2sid_ros.core.lockstep.LockstepStream` whose :meth:`step_of` costs O(log T).

    The core class re-sorts every command of the trial for each frame (O(T log T): 2-3 ms
    per frame late in a 60 s trial at 60 Hz on the bench machine). This one keeps the
    command targets ``t_k + p`` sorted as commands arrive and applies the core's own rule
    (:func:`~vid2sid_ros.core.lockstep.assign_steps`) to the few commands whose target lies
    within one period of the frame, plus the nearest one on each side: the nearest target,
    the ``p / 2`` acceptance and the tie-breaking are unchanged, so the result equals the
    core's (``test/test_ros_lockstep.py`` checks it on irregular stamps). Trajectories are
    still built by the core's :meth:`trajectory`.
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        self._targets: list[tuple[float, int]] = []  # (t_k + p, k), sorted
        self._last_step = -1

    def add_command(self, step: int, stamp: float) -> None:
        k, t = int(step), float(stamp)
        old = self.commands.get(k)
        if old is not None:
            i = bisect.bisect_left(self._targets, (old + self.period, k))
            if i < len(self._targets) and self._targets[i] == (old + self.period, k):
                del self._targets[i]
        super().add_command(k, t)
        bisect.insort(self._targets, (t + self.period, k))
        self._last_step = max(self._last_step, k)

    def step_of(self, stamp: float) -> int:
        if not self.commands:
            return -1
        f, p, tg = float(stamp), self.period, self._targets
        lo = max(bisect.bisect_left(tg, (f - p, -1)) - 1, 0)
        hi = min(bisect.bisect_right(tg, (f + p, 1 << 62)) + 1, len(tg))
        steps = sorted(k for _, k in tg[lo:hi])  # step order, as the core passes them
        k = int(assign_steps([f], [self.commands[s] for s in steps], p)[0]) if steps else -1
        if k >= 0:
            return int(steps[k])
        j = self._last_step  # extrapolate from the last known command, as the core does
        k_est = j + int(round((f - p - self.commands[j]) / p))
        return k_est if k_est > j else -1


@dataclass
class _Trial:
    trial_id: str
    period: float
    streams: dict[str, LockstepStream]
    first_stamp: float
    last_stamp: float
    num_steps: int | None = None
    deadline: float = float("inf")
    finalize_queued: bool = False
    finalized: bool = False
    seen: dict[str, set] = field(default_factory=lambda: {"real": set(), "sim": set()})
    delays: dict[str, list] = field(default_factory=lambda: {"real": [], "sim": []})


class TrackerNode(Node):
    """Detects keypoints in both streams and assembles per-trial trajectories."""

    SOURCES = ("real", "sim")

    def __init__(self, **kwargs) -> None:
        super().__init__("tracker_node", **kwargs)
        declare(self, PARAMS)
        p = values(self, PARAMS)
        rig = resolve_rig(p["rig_config"] or p["rig"])
        self._trackers = {s: rig_tracker(rig)[0] for s in self.SOURCES}  # one per stream: trackers keep state
        self._tracker_trial = {s: "" for s in self.SOURCES}
        self.keypoint_names = tracker_names(self._trackers["real"])
        self._queue: BufferQueue = BufferQueue(p["queue_size"])
        self._lock = threading.Lock()
        self._trials: dict[str, _Trial] = {}
        self.results: dict[str, dict[str, Trajectory]] = {}
        #: per finished trial and stream: arrival time minus header stamp of every frame, s (F,)
        self.receipt_delays: dict[str, dict[str, np.ndarray]] = {}
        self.frames_outside_trials = 0
        self.frames_after_finalize = 0
        self.decode_errors = 0
        from visualization_msgs.msg import ImageMarker

        self._marker_pub = {s: create_stream_publisher(self, ImageMarker, TOPICS[f"{s}_image_markers"],
                                                      qos_profile(self, "streams"))
                            for s in self.SOURCES}
        self._kp_pub = {s: create_stream_publisher(self, Keypoints, TOPICS[f"{s}_keypoints"], qos_profile(self, "streams"))
                        for s in self.SOURCES}
        self._traj_pub = {s: create_stream_publisher(self, TrajectoryMsg, TOPICS[f"{s}_trajectory"],
                                                    qos_profile(self, "results"))
                          for s in self.SOURCES}
        group = MutuallyExclusiveCallbackGroup()
        for s in self.SOURCES:
            create_qos_subscription(self, Image, TOPICS[f"{s}_image"], lambda m, s=s: self._on_image(s, m), "images",
                                    callback_group=group, raw=True)
        create_qos_subscription(self, ExcitationCommand, TOPICS["excitation"], self._on_command, "streams",
                                callback_group=group)
        create_qos_subscription(self, ExcitationCommand, TOPICS["trial_end"], self._on_trial_end, "streams",
                                callback_group=group)
        self.create_timer(0.1, self._check_trials, callback_group=group)
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._work, name=f"{self.get_name()}_worker", daemon=True)
        self._worker.start()

    # -- callbacks (spin thread): bookkeeping only ------------------------------------------
    def _now(self) -> float:
        return time.time()

    def _on_command(self, msg) -> None:
        t = s_from_stamp(msg.header.stamp)
        with self._lock:
            tr = self._trials.get(msg.trial_id)
            if tr is None:
                for prev in self._trials.values():  # a trial-end notice that never came: close it now
                    if prev.num_steps is None:
                        prev.num_steps = max(prev.streams["real"].commands) + 1
                        prev.deadline = self._now() + self.get_parameter("trial_grace").value
                        self.get_logger().warning(f"trial {prev.trial_id}: no trial-end notice before trial "
                                                  f"{msg.trial_id} began; closing it after {prev.num_steps} steps")
                tr = _Trial(msg.trial_id, float(msg.period),
                            {s: IndexedLockstepStream(msg.trial_id, s, self.keypoint_names, float(msg.period),
                                               self.get_parameter("late_tolerance").value or None)
                             for s in self.SOURCES}, t, t)
                self._trials[msg.trial_id] = tr
            for st in tr.streams.values():
                st.add_command(int(msg.step), t)
            tr.first_stamp, tr.last_stamp = min(tr.first_stamp, t), max(tr.last_stamp, t)

    def _on_trial_end(self, msg) -> None:
        with self._lock:
            tr = self._trials.get(msg.trial_id)
            if tr is None:
                self.get_logger().warning(f"trial-end notice for unknown trial {msg.trial_id!r} ignored")
                return
            tr.num_steps = int(msg.step)
            tr.deadline = self._now() + self.get_parameter("trial_grace").value

    def _check_trials(self) -> None:
        """Queue the trajectories of an ended trial once both streams hold every step, or at its deadline."""
        now = self._now()
        with self._lock:
            ready = []
            for tr in self._trials.values():
                if tr.num_steps is None or tr.finalize_queued:
                    continue
                complete = all(len(tr.seen[s] & set(range(tr.num_steps))) == tr.num_steps for s in self.SOURCES)
                if complete or now >= tr.deadline:
                    tr.finalize_queued = True
                    ready.append(tr.trial_id)
        for tid in ready:
            self._queue.put(("finalize", tid), droppable=False)

    def _on_image(self, source: str, msg) -> None:
        """Queue a frame: serialized ``bytes`` (raw subscription) or an Image message."""
        self._queue.put(("frame", source, msg, self._now()))

    # -- worker thread ------------------------------------------------------------------------
    def _trial_of(self, t: float) -> _Trial | None:
        with self._lock:
            best = None
            for tr in self._trials.values():
                end = tr.last_stamp + 1.5 * tr.period if tr.num_steps is not None else float("inf")
                if tr.first_stamp + 0.5 * tr.period <= t <= end and (best is None or tr.first_stamp > best.first_stamp):
                    best = tr
            return best

    def _work(self) -> None:
        while not self._stop.is_set():
            item = self._queue.get(timeout=0.1)
            if item is None:
                continue
            try:
                if item[0] == "frame":
                    self._process_frame(*item[1:])
                else:
                    self._finalize(item[1])
            except Exception as err:  # noqa: BLE001 - one bad frame must not stop the tracker
                self.get_logger().error(f"tracker: {type(err).__name__}: {err}")

    def _process_frame(self, source: str, msg, received: float) -> None:
        if isinstance(msg, (bytes, bytearray, memoryview)):
            try:
                msg = deserialize_message(bytes(msg), Image)
            except Exception as err:  # noqa: BLE001 - a corrupt message is one lost frame
                self.decode_errors += 1
                self.get_logger().warning(f"{source} frame skipped: cannot deserialize the Image message: {err}")
                return
        t = s_from_stamp(msg.header.stamp)
        tr = self._trial_of(t)
        if tr is None:
            self.frames_outside_trials += 1
            return
        if tr.finalized:
            self.frames_after_finalize += 1
            return
        try:
            rgb = image_to_array(msg, "rgb8", copy=False)  # the detector only reads the pixels
        except ImageEncodingError as err:
            self.decode_errors += 1
            self.get_logger().warning(f"{source} frame at t={t:.3f} s skipped: {err}")
            return
        tracker = self._trackers[source]
        if self._tracker_trial[source] != tr.trial_id:
            reset_tracker(tracker)  # new trial: search the whole frame again
            self._tracker_trial[source] = tr.trial_id
        xy, valid = tracker.detect(rgb)
        xy, valid = np.asarray(xy, float), np.asarray(valid, bool)
        with self._lock:
            step = tr.streams[source].add_frame(t, xy, valid, received)
            tr.seen[source].add(step)
            tr.delays[source].append(received - t)
        self._kp_pub[source].publish(keypoints_msg(source, tr.trial_id, step, msg.header.stamp, self.keypoint_names,
                                                   xy, valid, msg.header.frame_id))
        # the same keypoints as a standard image annotation (Foxglove, RViz), stamped like the image
        self._marker_pub[source].publish(image_marker_msg(source, msg.header.stamp, msg.header.frame_id, xy, valid))

    def _finalize(self, trial_id: str) -> None:
        with self._lock:
            tr = self._trials.get(trial_id)
            if tr is None or tr.finalized:
                return
            tr.finalized = True
            trajs = {s: st.trajectory(tr.num_steps) for s, st in tr.streams.items()}
            for st in tr.streams.values():
                st.frames.clear()
        self.results[trial_id] = trajs
        self.receipt_delays[trial_id] = {s: np.asarray(d, dtype=float) for s, d in tr.delays.items()}
        stamp = self.get_clock().now().to_msg()
        for s, traj in trajs.items():
            self._traj_pub[s].publish(trajectory_to_msg(traj, stamp=stamp))
            m = traj.meta
            line = (f"trial {trial_id} {s}: {traj.num_frames} steps, {int(traj.valid.all(axis=1).sum())} fully tracked, "
                    f"dropped {m['dropped_frames']}, late {m['late_frames']}, duplicate {m['duplicate_frames']}"
                    + (f", delay p50 {1e3 * m['delay_p50_s']:.0f} ms max {1e3 * m['delay_max_s']:.0f} ms"
                       if "delay_p50_s" in m else ""))
            if m["dropped_frames"]:
                self.get_logger().warning(line)
            else:
                self.get_logger().info(line)

    @property
    def queue_drops(self) -> int:
        """Frames dropped by the bounded queue so far."""
        return self._queue.dropped

    def destroy_node(self) -> None:
        if getattr(self, "_worker", None) is not None:  # absent when __init__ failed
            self._stop.set()
            self._worker.join(timeout=2.0)
        super().destroy_node()


def make_node(**kwargs) -> TrackerNode:
    return TrackerNode(**kwargs)


def main(args=None) -> None:
    """``ros2 run vid2sid_ros <this node>``: init, build, spin until Ctrl-C/SIGTERM, destroy."""
    run_node(make_node, args)


if __name__ == "__main__":
    main()
