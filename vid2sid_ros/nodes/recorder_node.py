"""recorder_node: every topic of a calibration into one rosbag2 bag (MCAP, zstd chunks).

Subscribes to the graph's topics in *serialized* form (``raw=True``: the CDR bytes are
written unchanged, no decode/encode) and appends them to a
:class:`~vid2sid_ros.io.rosbag.BagWriter` stamped with the receive time, like
``ros2 bag record``. The bag carries the full message definitions of the vid2sid_ros
types, so ``ros2 bag info`` and Foxglove read it.

Messages are appended as they arrive. Crash safety: an MCAP chunk is closed and fsynced
to disk every ``chunk_kib`` KiB and at every trial end (``/vid2sid/excitation/trial_end``),
so a SIGKILL or power loss loses at most the trial in progress;
``vid2sid bag repair BAG`` rebuilds the summary and ``metadata.yaml`` of such a bag from
its completed chunks. Normally the bag is finished (summary + ``metadata.yaml``) by
``/vid2sid/recorder/stop`` (std_srvs/Trigger) or when the node shuts down (SIGINT/SIGTERM).
Like ``ros2 bag record``, each topic carries its type hash and the QoS profiles its
publishers offered (queried when its first message arrives). A bad message on a topic
cannot stop the recording: the recorder never decodes messages.
"""

from __future__ import annotations

import time
from pathlib import Path

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image
from std_srvs.srv import Trigger
from visualization_msgs.msg import ImageMarker

from ..io.rosbag import BagError, BagWriter, make_typestore
from .common import STREAM_QOS, ExcitationCommand, create_qos_subscription, qos_params, Keypoints, ParameterUpdate, TrajectoryMsg, run_node
from .graph import TOPICS
from .params import Param, declare, values

__all__ = ["RecorderNode", "PARAMS", "RECORDED", "make_node", "main"]

#: topic key (graph.TOPICS) -> (rclpy type, ROS type name)
RECORDED = {
    "excitation": (ExcitationCommand, "vid2sid_ros/msg/ExcitationCommand"),
    "trial_end": (ExcitationCommand, "vid2sid_ros/msg/ExcitationCommand"),
    "real_image": (Image, "sensor_msgs/msg/Image"),
    "sim_image": (Image, "sensor_msgs/msg/Image"),
    "real_camera_info": (CameraInfo, "sensor_msgs/msg/CameraInfo"),
    "sim_camera_info": (CameraInfo, "sensor_msgs/msg/CameraInfo"),
    "real_image_markers": (ImageMarker, "visualization_msgs/msg/ImageMarker"),
    "sim_image_markers": (ImageMarker, "visualization_msgs/msg/ImageMarker"),
    "real_keypoints": (Keypoints, "vid2sid_ros/msg/Keypoints"),
    "sim_keypoints": (Keypoints, "vid2sid_ros/msg/Keypoints"),
    "real_trajectory": (TrajectoryMsg, "vid2sid_ros/msg/Trajectory"),
    "sim_trajectory": (TrajectoryMsg, "vid2sid_ros/msg/Trajectory"),
    "parameter_update": (ParameterUpdate, "vid2sid_ros/msg/ParameterUpdate"),
}

PARAMS = [
    Param("enabled", True, "record a bag", read_only=True),
    Param("bag_path", "", "bag directory to create (must not exist); empty = <output_dir>/bag_<YYYYmmdd_HHMMSS>",
          read_only=True),
    Param("output_dir", "runs", "parent directory of automatically named bags", read_only=True),
    Param("topics", list(RECORDED), "topic keys to record: " + ", ".join(f"{k} ({TOPICS[k]})" for k in RECORDED),
          read_only=True),
    Param("compression", True, "zstd-compress the MCAP chunks", read_only=True),
    Param("chunk_kib", 256, "close and fsync an MCAP chunk once this many KiB are pending (and at every trial end)",
          read_only=True, lower=4, upper=65536),
] + qos_params(("images", "streams", "results"))


def _qos_kind(key: str) -> str:
    """QoS kind (:data:`~vid2sid_ros.nodes.common.QOS_KINDS`) of a recorded topic key."""
    if key.endswith(("_image", "_camera_info")):
        return "images"
    return "results" if key.endswith("_trajectory") or key == "parameter_update" else "streams"


class RecorderNode(Node):
    """Serialized-message recorder (see module docstring)."""

    def __init__(self, **kwargs) -> None:
        super().__init__("recorder_node", **kwargs)
        declare(self, PARAMS, extra_check=self._check)
        p = values(self, PARAMS)
        self.writer: BagWriter | None = None
        self.bag_path: Path | None = None
        self.write_errors = 0
        self.last_write = time.monotonic()
        if not p["enabled"]:
            self.get_logger().info("recording disabled")
            return
        path = Path(p["bag_path"]) if p["bag_path"] else Path(p["output_dir"]) / time.strftime("bag_%Y%m%d_%H%M%S")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.writer = BagWriter(path, typestore=make_typestore(), compression=p["compression"],
                                chunk_bytes=int(p["chunk_kib"]) * 1024)
        self.bag_path = path
        self._trial_end = self.resolve_topic_name(TOPICS["trial_end"])
        self._declared: set[str] = set()  # topics whose connection (with the offered QoS) is in the bag
        group = MutuallyExclusiveCallbackGroup()
        for key in p["topics"]:
            cls, typename = RECORDED[key]
            topic = self.resolve_topic_name(TOPICS[key])
            self.writer.counts.setdefault(topic, 0)  # counted from the start; declared in the bag on first message
            create_qos_subscription(self, cls, TOPICS[key], lambda data, t=topic, n=typename: self._write(t, n, data),
                                    _qos_kind(key), callback_group=group, raw=True)
        self.create_service(Trigger, TOPICS["recorder_stop"], self._srv_stop, callback_group=group)
        self.get_logger().info(f"recording {len(p['topics'])} topics to {path}")

    @staticmethod
    def _check(name, value):
        if name == "topics":
            unknown = [t for t in value if t not in RECORDED]
            if unknown:
                return f"parameter 'topics': unknown key(s) {unknown}; expected some of {', '.join(RECORDED)}"
        return None

    def _write(self, topic: str, typename: str, data: bytes) -> None:
        if self.writer is None or self.writer.closed:
            return
        self.last_write = time.monotonic()
        try:
            if topic not in self._declared:  # first message: record what its publishers offer
                self.writer.add_topic(topic, typename, qos=self._offered_qos(topic))
                self._declared.add(topic)
            self.writer.write(topic, typename, data, time.time_ns())
            if topic == self._trial_end:
                self.writer.flush()  # a completed trial is on disk before the next one starts
        except (BagError, OSError) as err:
            self.write_errors += 1
            if self.write_errors == 1 or self.write_errors % 100 == 0:
                self.get_logger().error(f"bag {self.bag_path}: write failed ({self.write_errors} so far): {err}")

    def _offered_qos(self, topic: str) -> list:
        """The QoS profiles the topic's publishers offer (rosbag2's ``offered_qos_profiles``)."""
        try:
            return [info.qos_profile for info in self.get_publishers_info_by_topic(topic)] or [STREAM_QOS]
        except Exception:  # noqa: BLE001 - graph introspection is best effort; the stream QoS is the fallback
            return [STREAM_QOS]

    def close(self) -> str:
        """Finish the bag; returns a summary line."""
        if getattr(self, "writer", None) is None or self.writer.closed:
            return "no open bag"
        self.writer.close()
        n = sum(self.writer.counts.values())
        line = f"bag {self.bag_path} closed: {n} messages (" + ", ".join(
            f"{t}: {c}" for t, c in self.writer.counts.items() if c) + ")"
        self.get_logger().info(line)
        return line

    def _srv_stop(self, request, response):
        response.message = self.close()
        response.success = True
        return response

    def destroy_node(self) -> None:
        self.close()
        super().destroy_node()


def make_node(**kwargs) -> RecorderNode:
    return RecorderNode(**kwargs)


def main(args=None) -> None:
    """``ros2 run vid2sid_ros <this node>``: init, build, spin until Ctrl-C/SIGTERM, destroy."""
    run_node(make_node, args)


if __name__ == "__main__":
    main()
