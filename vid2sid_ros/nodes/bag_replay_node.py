"""bag_replay_node: a recorded real trial (camera images + commands) replaces the camera and rig.

Reads a rosbag2 bag (``vid2sid_ros.io.rosbag``, no ROS tooling needed) and republishes,
with the recorded relative timing, its camera frames on ``/vid2sid/real/image_raw`` (and
the CameraInfo beside them on ``/vid2sid/real/camera_info`` when the bag has it), and
its commands on ``/vid2sid/excitation/command`` and ``/vid2sid/excitation/trial_end``, so the sim
twin re-runs the same commanded excitation in lockstep and the tracker and calibrator
work as live. Every header stamp is shifted by one constant (replay start - recording
start), which keeps the frame-to-step pairing of the recording exactly.

Publishing is driven by a timer (``tick``), not a sleep loop. A missing bag, a missing
topic or a topic of the wrong type is reported with one clear error line (and by
``/vid2sid/replay/start``); the node then stays idle and the graph keeps running. A
message that cannot be decoded mid-replay stops the replay: what was published stands,
``error`` says where it stopped and ``finished`` is set (a partial replay is never
reported as a finished one).
"""

from __future__ import annotations

import time

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import CameraInfo, Image
from std_srvs.srv import Trigger

from ..io.rosbag import DEFAULT_TOPICS, BagError, bag_topics, check_topic_types, read_messages, topic_in_bag
from .common import ExcitationCommand, create_stream_publisher, qos_params, qos_profile, wait_for_subscribers, s_from_stamp, stamp_from_s, run_node
from .graph import TOPICS
from .params import Param, declare, values

__all__ = ["BagReplayNode", "PARAMS", "make_node", "main", "REPLAY_START"]

REPLAY_START = "vid2sid/replay/start"

PARAMS = [
    Param("bag_path", "", "rosbag2 directory of a recorded real trial", read_only=True),
    Param("trial_id", "", "replay only this trial; empty = every trial in the bag"),
    Param("image_topic", DEFAULT_TOPICS["real_image"], "camera topic IN THE BAG", read_only=True),
    Param("command_topic", DEFAULT_TOPICS["excitation"], "command topic IN THE BAG", read_only=True),
    Param("trial_end_topic", DEFAULT_TOPICS["trial_end"], "trial-end topic IN THE BAG (optional in the bag)",
          read_only=True),
    Param("camera_info_topic", DEFAULT_TOPICS["real_camera_info"], "CameraInfo topic IN THE BAG (optional in the "
          "bag; republished on /vid2sid/real/camera_info)", read_only=True),
    Param("autostart", True, "start replaying once the node is up (after start_delay, then wait_for)"),
    Param("start_delay", 1.0, "delay before the first message, for subscribers to connect", "s", 0.0, 60.0),
    Param("wait_for", [""], "nodes (in this namespace) whose command subscription must be matched before the "
          "replay starts, e.g. [sim_twin_node, tracker_node, calibrator_node, recorder_node]; empty = none",
          read_only=True),
    Param("wait_timeout", 30.0, "longest wait for 'wait_for' before the replay is refused naming the missing "
          "nodes", "s", 0.0, 3600.0),
    Param("tick", 0.002, "timer period of the replay clock", "s", 0.0005, 0.1, read_only=True),
] + qos_params(("images", "streams"))


class BagReplayNode(Node):
    """Timer-driven bag replay (see module docstring)."""

    def __init__(self, **kwargs) -> None:
        super().__init__("bag_replay_node", **kwargs)
        declare(self, PARAMS)
        self._p = values(self, PARAMS)
        self._pub_img = create_stream_publisher(self, Image, TOPICS["real_image"], qos_profile(self, "images", publisher=True))
        self._pub_info = create_stream_publisher(self, CameraInfo, TOPICS["real_camera_info"], qos_profile(self, "images", publisher=True))
        self._pub_cmd = create_stream_publisher(self, ExcitationCommand, TOPICS["excitation"], qos_profile(self, "streams"))
        self._pub_end = create_stream_publisher(self, ExcitationCommand, TOPICS["trial_end"], qos_profile(self, "streams"))
        self.error: str | None = None
        self.published = {"image": 0, "camera_info": 0, "command": 0, "trial_end": 0}
        self.finished = False
        self._iter = None
        self._next = None
        self._offset_ns = 0
        self._t0_bag = 0
        self._group = MutuallyExclusiveCallbackGroup()
        self.create_service(Trigger, REPLAY_START, self._srv_start, callback_group=self._group)
        self._timer = None
        self._check_bag()
        self._wait_for = [n for n in self._p["wait_for"] if n]
        self._waiting_since = time.monotonic()
        if self.error is None and self._p["autostart"]:
            # polled every 0.1 s (never blocking the executor) until wait_for's nodes subscribe, then start_delay
            period = 0.1 if self._wait_for else max(self._p["start_delay"], 1e-3)
            self._start_timer = self.create_timer(period, self._autostart, callback_group=self._group)

    def _check_bag(self) -> None:
        p = self._p
        try:
            if not p["bag_path"]:
                raise BagError("parameter 'bag_path' is empty: set the bag to replay")
            present = bag_topics(p["bag_path"])
            former = topic_in_bag(present, p["command_topic"])
            if former != p["command_topic"]:  # a bag recorded before the command topic was renamed
                self.get_logger().info(f"bag {p['bag_path']}: commands read from {former} (the command topic's "
                                       f"former name), replayed on {self._pub_cmd.topic_name}")
                p["command_topic"] = former
            self._expect = {p["image_topic"]: "sensor_msgs/msg/Image",
                            p["command_topic"]: "vid2sid_ros/msg/ExcitationCommand"}
            if p["trial_end_topic"] in present:
                self._expect[p["trial_end_topic"]] = "vid2sid_ros/msg/ExcitationCommand"
            if p["camera_info_topic"] in present:  # optional: the intrinsics beside the frames
                self._expect[p["camera_info_topic"]] = "sensor_msgs/msg/CameraInfo"
            check_topic_types(p["bag_path"], present, self._expect)
            self._counts = {t: present[t][1] for t in self._expect}
        except BagError as err:
            self.error = str(err)
            self.get_logger().error(f"replay unavailable: {err}; the graph keeps running")

    def _autostart(self) -> None:
        if self._wait_for:  # one graph query per tick: the executor keeps spinning meanwhile
            missing = wait_for_subscribers(self, self._pub_cmd, self._wait_for, 0.0)
            waited = time.monotonic() - self._waiting_since
            if missing and waited < self._p["wait_timeout"]:
                self.get_logger().info(f"replay waits for {', '.join(missing)} to subscribe ({waited:.0f} s)",
                                       throttle_duration_sec=10.0)
                return
            self._wait_for = []
            self._start_timer.cancel()
            if not missing:  # matched: start_delay, then start() (whose own wait then passes at once)
                self._start_timer = self.create_timer(max(self._p["start_delay"], 1e-3), self._autostart,
                                                      callback_group=self._group)
                return
        self._start_timer.cancel()
        try:
            self.start()
        except RuntimeError as err:
            self.error = str(err)
            self.get_logger().error(f"replay not started: {err}")

    def start(self) -> str:
        """Begin replaying; returns a summary or raises RuntimeError."""
        if self.error is not None:
            raise RuntimeError(self.error)
        if self._timer is not None:
            raise RuntimeError("replay already running")
        missing = wait_for_subscribers(self, self._pub_cmd, self._p["wait_for"], self._p["wait_timeout"])
        if missing:
            raise RuntimeError(f"no command subscription of {', '.join(missing)} on {self._pub_cmd.topic_name} "
                               f"after {self._p['wait_timeout']:g} s (wait_for); is that node running in this "
                               "namespace?")
        self._iter = read_messages(self._p["bag_path"], list(self._expect), expect_types=self._expect, keep_raw=True)
        self._next = next(self._iter, None)
        if self._next is None:
            raise RuntimeError(f"bag {self._p['bag_path']}: no messages on {', '.join(self._expect)}")
        self._t0_bag = self._next.timestamp_ns
        self._offset_ns = self.get_clock().now().nanoseconds - self._t0_bag
        self._timer = self.create_timer(self._p["tick"], self._tick, callback_group=self._group)
        line = f"replaying {self._p['bag_path']}: " + ", ".join(f"{t}: {n}" for t, n in self._counts.items())
        self.get_logger().info(line)
        return line

    def _tick(self) -> None:
        now = self.get_clock().now().nanoseconds
        p = self._p
        try:
            while self._next is not None and self._next.timestamp_ns + self._offset_ns <= now:
                m = self._next
                self._publish(m)
                self._next = next(self._iter, None)
        except BagError as err:  # a corrupt message: what was published stands, the replay is not complete
            self.error = f"replay stopped after {self.published}: {err}"  # was: unset, as if the bag were whole
            self.get_logger().error(self.error)
            self._next = None
        if self._next is None:
            self._timer.cancel()
            self.finished = True
            if self.error is None:
                self.get_logger().info(f"replay of {p['bag_path']} finished: {self.published}")

    def _publish(self, m) -> None:
        p = self._p
        shift = self._offset_ns * 1e-9
        if m.topic == p["image_topic"]:
            msg = deserialize_message(m.rawdata, Image)
            msg.header.stamp = stamp_from_s(s_from_stamp(msg.header.stamp) + shift)
            self._pub_img.publish(msg)
            self.published["image"] += 1
            return
        if m.topic == p["camera_info_topic"]:  # same shift as the images: it keeps the frame's stamp
            msg = deserialize_message(m.rawdata, CameraInfo)
            msg.header.stamp = stamp_from_s(s_from_stamp(msg.header.stamp) + shift)
            self._pub_info.publish(msg)
            self.published["camera_info"] += 1
            return
        msg = deserialize_message(m.rawdata, ExcitationCommand)
        if p["trial_id"] and msg.trial_id != p["trial_id"]:
            return
        msg.header.stamp = stamp_from_s(s_from_stamp(msg.header.stamp) + shift)
        if m.topic == p["command_topic"]:
            self._pub_cmd.publish(msg)
            self.published["command"] += 1
        else:
            self._pub_end.publish(msg)
            self.published["trial_end"] += 1

    def _srv_start(self, request, response):
        try:
            response.message = self.start()
            response.success = True
        except RuntimeError as err:
            response.success, response.message = False, str(err)
        return response


def make_node(**kwargs) -> BagReplayNode:
    return BagReplayNode(**kwargs)


def main(args=None) -> None:
    """``ros2 run vid2sid_ros <this node>``: init, build, spin until Ctrl-C/SIGTERM, destroy."""
    run_node(make_node, args)


if __name__ == "__main__":
    main()
