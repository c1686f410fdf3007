"""bag_replay_node republishes the recorded CameraInfo beside the frames (it used to drop it).

The bag is made here: six command steps, a 48x64 frame after each, and a CameraInfo with the frame's
stamp (what camera_node publishes); the replay must put every CameraInfo on /vid2sid/real/camera_info
with its intrinsics intact and the same shifted stamp as its frame. In-process, one rclpy context.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy comes with `make setup` (.venv)")

from rclpy.parameter import Parameter  # noqa: E402
from rclpy.serialization import serialize_message  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image  # noqa: E402

from vid2sid_ros._interfaces import require_interfaces  # noqa: E402

require_interfaces()

from vid2sid_ros.io.image_msg import array_to_image_fields  # noqa: E402
from vid2sid_ros.io.rosbag import BagWriter  # noqa: E402
from vid2sid_ros.nodes.bag_replay_node import BagReplayNode  # noqa: E402
from vid2sid_ros.nodes.common import STREAM_QOS, ExcitationCommand, s_from_stamp, stamp_from_s  # noqa: E402
from vid2sid_ros.nodes.graph import TOPICS  # noqa: E402

K = [80.0, 0.0, 32.0, 0.0, 80.0, 24.0, 0.0, 0.0, 1.0]
STEPS = 6


def _bag(path, *, info_type: str = "sensor_msgs/msg/CameraInfo", corrupt_image: int | None = None,
         command_topic: str = "/vid2sid/excitation/command") -> None:
    t0 = 50.0
    with BagWriter(path) as w:
        for k in range(STEPS):
            t = t0 + 0.1 * k
            c = ExcitationCommand(trial_id="t", step=k, period=0.1, values=[0.1 * k], actuator_names=["m"])
            c.header.stamp = stamp_from_s(t)
            w.write(command_topic, "vid2sid_ros/msg/ExcitationCommand", serialize_message(c), int(t * 1e9))
            img = Image()
            for f, v in array_to_image_fields(np.full((48, 64, 3), 10 * k, np.uint8), "rgb8").items():
                setattr(img, f, v)
            img.header.stamp = stamp_from_s(t + 0.1)
            data = serialize_message(img)
            if k == corrupt_image:  # a truncated CDR payload: the header survives, the pixels do not
                data = data[:40]
            w.write("/vid2sid/real/image_raw", "sensor_msgs/msg/Image", data, int((t + 0.1) * 1e9))
            info = CameraInfo(width=64, height=48, k=K, distortion_model="plumb_bob", d=[0.01, 0.0, 0.0, 0.0, 0.0])
            info.header = img.header
            w.write("/vid2sid/real/camera_info", info_type,
                    serialize_message(info if info_type.endswith("CameraInfo") else c), int((t + 0.1) * 1e9) + 1)


@pytest.mark.timeout(60)
def test_recorded_camera_info_is_republished_with_its_frames_stamp(ros, tmp_path):
    bag = tmp_path / "bag"
    _bag(bag)
    images, infos = [], []
    listener = ros.node("listener")
    listener.create_subscription(Image, TOPICS["real_image"], images.append, STREAM_QOS)
    listener.create_subscription(CameraInfo, TOPICS["real_camera_info"], infos.append, STREAM_QOS)
    node = BagReplayNode(context=ros.context, parameter_overrides=[
        Parameter("bag_path", value=str(bag)), Parameter("start_delay", value=0.5)])
    ros.nodes.append(node)
    ros.executor.add_node(node)
    assert node.error is None, node.error
    assert ros.spin_until(lambda: node.finished and len(infos) == STEPS and len(images) == STEPS, timeout=30.0), \
        (node.published, len(infos), len(images))
    assert node.published["camera_info"] == STEPS  # was: the topic was not even read
    assert [list(i.k) for i in infos] == [K] * STEPS and infos[0].distortion_model == "plumb_bob"
    assert (infos[0].width, infos[0].height) == (64, 48)
    assert [s_from_stamp(i.header.stamp) for i in infos] == [s_from_stamp(m.header.stamp) for m in images]


def test_a_camera_info_topic_of_another_type_is_one_error(ros, tmp_path):
    bag = tmp_path / "bag"
    _bag(bag, info_type="vid2sid_ros/msg/ExcitationCommand")
    node = BagReplayNode(context=ros.context, parameter_overrides=[Parameter("bag_path", value=str(bag))])
    ros.nodes.append(node)
    assert node.error == (f"bag {bag}: topic /vid2sid/real/camera_info holds vid2sid_ros/msg/ExcitationCommand, "
                          "expected sensor_msgs/msg/CameraInfo")


@pytest.mark.timeout(60)
def test_a_corrupt_message_stops_the_replay_with_an_error_not_a_finish(ros, tmp_path):
    """Was: the replay logged "replay stopped", then "finished" with ``error`` unset, as if the bag were
    whole. The frames before the corrupt one are published; ``error`` names the decode failure."""
    bag = tmp_path / "bag"
    _bag(bag, corrupt_image=3)
    images = []
    listener = ros.node("listener")
    listener.create_subscription(Image, TOPICS["real_image"], images.append, STREAM_QOS)
    node = BagReplayNode(context=ros.context, parameter_overrides=[
        Parameter("bag_path", value=str(bag)), Parameter("start_delay", value=0.5)])
    ros.nodes.append(node)
    ros.executor.add_node(node)
    assert node.error is None, node.error  # the bag's topics and types are right: the replay starts
    assert ros.spin_until(lambda: node.finished, timeout=30.0), node.published
    assert node.published["image"] == 3 and node.published["command"] == 4, node.published
    assert node.error is not None and node.error.startswith("replay stopped after {'image': 3")
    assert "cannot decode a sensor_msgs/msg/Image message on /vid2sid/real/image_raw" in node.error
    ros.spin_until(lambda: len(images) == 3, timeout=5.0)
    assert [int(m.data[0]) for m in images] == [0, 10, 20]


@pytest.mark.timeout(60)
def test_autostart_waits_for_the_named_subscribers(ros, tmp_path):
    """Was: autostart replayed after a fixed start_delay whether or not anyone listened; under
    `ros2 launch` (one process per node) the replay was over before the twin was built, and the
    graph never saw the trial. With ``wait_for`` it starts only once those nodes subscribe."""
    bag = tmp_path / "bag"
    _bag(bag)
    node = BagReplayNode(context=ros.context, parameter_overrides=[
        Parameter("bag_path", value=str(bag)), Parameter("start_delay", value=0.2),
        Parameter("wait_for", value=["late_twin"])])
    ros.nodes.append(node)
    ros.executor.add_node(node)
    ros.spin_until(lambda: False, timeout=1.5)  # well past start_delay: nobody named has subscribed
    assert node.published == {"image": 0, "camera_info": 0, "command": 0, "trial_end": 0}
    commands = []
    ros.node("late_twin").create_subscription(ExcitationCommand, TOPICS["excitation"], commands.append, STREAM_QOS)
    assert ros.spin_until(lambda: node.finished and len(commands) == STEPS, timeout=30.0), (node.published, len(commands))
    assert node.published["image"] == STEPS and node.error is None
    assert [c.step for c in commands] == list(range(STEPS))


@pytest.mark.timeout(60)
def test_a_bag_recorded_with_the_former_command_topic_still_replays_and_loads(ros, tmp_path):
    """The command topic moved from /vid2sid/excitation (also a namespace then) to
    /vid2sid/excitation/command: a bag of the former name replays on the new one, and the offline
    reader takes its commands too."""
    from vid2sid_ros.io.rosbag import load_bag_trials

    bag = tmp_path / "old_bag"
    _bag(bag, command_topic="/vid2sid/excitation")
    assert TOPICS["excitation"] == "vid2sid/excitation/command"
    commands = []
    ros.node("twin").create_subscription(ExcitationCommand, TOPICS["excitation"], commands.append, STREAM_QOS)
    node = BagReplayNode(context=ros.context, parameter_overrides=[
        Parameter("bag_path", value=str(bag)), Parameter("start_delay", value=0.5)])
    ros.nodes.append(node)
    ros.executor.add_node(node)
    assert node.error is None, node.error  # was: "topic /vid2sid/excitation/command ... is missing"
    assert ros.spin_until(lambda: node.finished and len(commands) == STEPS, timeout=30.0), node.published
    assert [c.step for c in commands] == list(range(STEPS)) and node.published["image"] == STEPS

    class _Blob:  # a tracker that finds one keypoint at the frame's grey level (px)
        names = ("k",)

        def detect(self, frame):
            return np.array([[float(frame[0, 0, 0]), 0.0]]), np.array([True])

        def reset(self):
            pass

    (trial,) = load_bag_trials(bag, tracker=_Blob())
    assert trial.excitation.name == "t" and trial.excitation.values.shape[0] == STEPS
