"""Bad input keeps the graph running and loses nothing recorded so far.

A camera that cannot be opened, a bag missing a topic, a bag holding the wrong message
type: each gives one clear error (log line / service answer), the other nodes go on, and
the recorder's bag holds every message sent before and after. (A Propose request naming
an unknown parameter is covered by test_ros_e2e.py.)
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy comes with `make setup` (.venv)")

from rclpy.parameter import Parameter  # noqa: E402
from rclpy.serialization import serialize_message  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from vid2sid_ros._interfaces import require_interfaces  # noqa: E402

require_interfaces()

from vid2sid_ros.io.image_msg import image_to_array  # noqa: E402
from vid2sid_ros.io.rosbag import BagWriter, bag_topics  # noqa: E402
from vid2sid_ros.nodes.bag_replay_node import REPLAY_START, BagReplayNode  # noqa: E402
from vid2sid_ros.nodes.camera_node import CameraNode  # noqa: E402
from vid2sid_ros.nodes.common import STREAM_QOS, ExcitationCommand  # noqa: E402
from vid2sid_ros.nodes.recorder_node import RecorderNode  # noqa: E402


def _params(**kw):
    return [Parameter(k, value=v) for k, v in kw.items()]


def _add(ros, node):
    ros.nodes.append(node)
    ros.executor.add_node(node)
    return node


def _bag_with(path, topics: dict[str, tuple[str, object]]):
    with BagWriter(path) as w:
        for i, (topic, (typename, msg)) in enumerate(topics.items()):
            w.write(topic, typename, serialize_message(msg), i + 1)


def test_bad_sources_are_reported_and_the_recording_goes_on(ros, tmp_path):
    bag = tmp_path / "rec"
    recorder = _add(ros, RecorderNode(context=ros.context, parameter_overrides=_params(bag_path=str(bag))))
    pub_node = ros.node("commander")
    pub = pub_node.create_publisher(ExcitationCommand, "/vid2sid/excitation/command", STREAM_QOS)
    assert ros.spin_until(lambda: pub.get_subscription_count() > 0, timeout=10.0)

    def send(k):
        pub.publish(ExcitationCommand(trial_id="t", step=k, period=0.1, values=[0.1 * k]))

    for k in range(5):
        send(k)
    assert ros.spin_until(lambda: recorder.writer.counts.get("/vid2sid/excitation/command", 0) == 5, timeout=10.0)

    # a camera that cannot be opened: one clear error, the node stays up
    cam = _add(ros, CameraNode(context=ros.context,
                               parameter_overrides=_params(source=str(tmp_path / "missing.mp4"), reopen_interval=0.2)))
    assert cam.open_error == f"cannot open camera file {str(tmp_path / 'missing.mp4')!r}"

    # a bag missing the command topic, and a bag holding the wrong type on the image topic
    no_cmd = tmp_path / "no_cmd"
    _bag_with(no_cmd, {"/vid2sid/real/image_raw": ("sensor_msgs/msg/Image", Image(height=1, width=1, encoding="rgb8",
                                                                                      step=3, data=b"\0\0\0"))})
    wrong = tmp_path / "wrong"
    cmd = ExcitationCommand(trial_id="x", step=0, period=0.1, values=[0.0])
    _bag_with(wrong, {"/vid2sid/excitation/command": ("vid2sid_ros/msg/ExcitationCommand", cmd),
                      "/vid2sid/real/image_raw": ("vid2sid_ros/msg/ExcitationCommand", cmd)})
    r1 = _add(ros, BagReplayNode(context=ros.context, parameter_overrides=_params(bag_path=str(no_cmd))))
    assert "topic /vid2sid/excitation/command (vid2sid_ros/msg/ExcitationCommand) is missing" in r1.error
    assert "the bag has: /vid2sid/real/image_raw (sensor_msgs/msg/Image)" in r1.error
    cli = pub_node.create_client(Trigger, REPLAY_START)
    assert ros.spin_until(cli.service_is_ready, timeout=10.0)
    res = ros.spin_future(cli.call_async(Trigger.Request()), timeout=10.0)
    assert not res.success and "is missing" in res.message
    ros.executor.remove_node(r1)
    r1.destroy_node()
    ros.nodes.remove(r1)
    r2 = _add(ros, BagReplayNode(context=ros.context, parameter_overrides=_params(bag_path=str(wrong))))
    assert "holds vid2sid_ros/msg/ExcitationCommand, expected sensor_msgs/msg/Image" in r2.error
    r3 = BagReplayNode(context=ros.context, parameter_overrides=_params(bag_path=str(tmp_path / "nope")))
    assert r3.error.startswith("bag not found")
    r3.destroy_node()

    # the graph keeps running: more messages are recorded, the camera keeps retrying
    for k in range(5, 10):
        send(k)
    assert ros.spin_until(lambda: recorder.writer.counts.get("/vid2sid/excitation/command", 0) == 10, timeout=10.0)
    assert cam.open_error is not None and cam.frames_published == 0
    recorder.close()
    assert bag_topics(bag)["/vid2sid/excitation/command"] == ("vid2sid_ros/msg/ExcitationCommand", 10)


def test_camera_publishes_video_file_frames_with_capture_stamps(ros, tmp_path):
    path = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 20.0, (64, 48))
    assert writer.isOpened()
    for k in range(8):
        img = np.zeros((48, 64, 3), np.uint8)
        img[:, :, 2] = 200  # BGR: red
        cv2.circle(img, (8 + 6 * k, 24), 4, (255, 255, 255), -1)
        writer.write(img)
    writer.release()
    got = []
    sub_node = ros.node("viewer")
    sub_node.create_subscription(Image, "/vid2sid/real/image_raw", got.append, STREAM_QOS)
    cam = _add(ros, CameraNode(context=ros.context,
                               parameter_overrides=_params(source=str(path), fps=40.0, width=32, height=24)))
    assert cam.open_error is None
    assert ros.spin_until(lambda: len(got) >= 6, timeout=10.0)
    m = got[0]
    assert (m.encoding, m.width, m.height, m.step, m.is_bigendian) == ("rgb8", 32, 24, 96, 0)
    assert m.header.frame_id == "real_camera_optical_frame"  # REP 103 (was: real_camera)
    rgb = image_to_array(m)
    assert rgb[..., 0].mean() > 150 and rgb[..., 2].mean() < 60  # red stays red after BGR -> rgb8
    stamps = [s.header.stamp.sec + 1e-9 * s.header.stamp.nanosec for s in got]
    assert all(b > a for a, b in zip(stamps, stamps[1:]))
