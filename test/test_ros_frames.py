"""REP 103/105 frames: optical frame ids, the camera's static transforms from a user rig config,
camera_info beside every image topic (the rollout's too)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy comes with `make setup` (.venv)")

REPO = Path(__file__).resolve().parents[1]
USER_RIG = REPO / "examples" / "rigs" / "urdf_arm" / "rig.yaml"


def _quat_matrix(q):
    from scipy.spatial.transform import Rotation

    return Rotation.from_quat([q.x, q.y, q.z, q.w]).as_matrix()


#: tf2_msgs/msg/TFMessage's type hash on a ROS 2 install (Jazzy/Kilted): ``ros2 topic info -v /tf``,
#: rosbag2's metadata.yaml and rmw_zenoh's key expressions all carry this RIHS01 string
UPSTREAM_TFMESSAGE_HASH = "RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087"


def _tf_static_listener(ros, name: str):
    """A node of ``ros`` subscribed to /tf_static the way tf2_ros's TransformListener is
    (reliable, transient local, depth 100); returns ``(node, messages)``."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from tf2_msgs.msg import TFMessage

    node, got = ros.node(name), []
    node.create_subscription(TFMessage, "/tf_static", got.append,
                             QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                                        durability=DurabilityPolicy.TRANSIENT_LOCAL))
    return node, got


def test_make_setup_provides_tf2_msgs():
    """`make setup` builds vendor/tf2_msgs where the PyPI wheels have none (a ROS install has its own)."""
    from tf2_msgs.msg import TFMessage

    assert TFMessage.get_fields_and_field_types() == {"transforms": "sequence<geometry_msgs/TransformStamped>"}


def test_sim_twin_latches_the_user_rig_camera_pose_and_images_carry_optical_frames(ros):
    """(was: frame ids real_camera / sim_camera, nothing on /tf or /tf_static, no camera_info beside
    /vid2sid/sim/rollout/image_raw; then: the transforms on a vid2sid topic, not /tf_static)"""
    from rclpy.parameter import Parameter
    from rclpy.qos import DurabilityPolicy, ReliabilityPolicy
    from sensor_msgs.msg import CameraInfo, Image

    from vid2sid_ros.core.camera import BODY_TO_OPTICAL
    from vid2sid_ros.core.yamlio import loads_yaml
    from vid2sid_ros.nodes.common import STREAM_QOS
    from vid2sid_ros.nodes.sim_twin_node import SimTwinNode
    from vid2sid_ros.srv import Rollout

    twin = SimTwinNode(context=ros.context, parameter_overrides=[Parameter("rig_config", value=str(USER_RIG))])
    ros.nodes.append(twin)
    ros.executor.add_node(twin)
    ros.spin_until(lambda: False, timeout=0.3)  # published before anyone listens
    viewer, msgs = _tf_static_listener(ros, "viewer")  # a late joiner: transient local hands it the message
    assert ros.spin_until(lambda: len(msgs) >= 1, timeout=20.0)
    ros.spin_until(lambda: False, timeout=0.3)
    assert len(msgs) == 1  # one message, every static transform of the twin in it (tf2's static broadcaster)
    got = {t.child_frame_id: t for t in msgs[0].transforms}
    # the publisher offers what tf2_ros's StaticTransformBroadcaster offers, with upstream's type
    (info,) = [i for i in viewer.get_publishers_info_by_topic("/tf_static") if i.node_name == "sim_twin_node"]
    assert info.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
    assert info.qos_profile.reliability == ReliabilityPolicy.RELIABLE
    assert str(info.topic_type_hash) == UPSTREAM_TFMESSAGE_HASH
    frames = ("sim_camera_link", "sim_camera_optical_frame", "real_camera_link", "real_camera_optical_frame")
    assert sorted(got) == sorted(frames)
    cfg = loads_yaml(USER_RIG.read_text(), source=str(USER_RIG))["camera"]["pose"]
    for cam in ("sim_camera", "real_camera"):
        link, optical = got[f"{cam}_link"], got[f"{cam}_optical_frame"]
        assert link.header.frame_id == "world" and optical.header.frame_id == f"{cam}_link"
        t = link.transform.translation
        assert np.allclose([t.x, t.y, t.z], cfg["position"], atol=1e-9)
        # world -> optical rotation: the optical z axis looks at the config's look_at point
        r_opt = _quat_matrix(link.transform.rotation) @ _quat_matrix(optical.transform.rotation)
        assert np.allclose(_quat_matrix(optical.transform.rotation), BODY_TO_OPTICAL, atol=1e-9)
        axis = np.asarray(cfg["look_at"], float) - np.asarray(cfg["position"], float)
        assert np.allclose(r_opt[:, 2], axis / np.linalg.norm(axis), atol=1e-6)
        assert r_opt[2, 1] < 0  # optical y (image down) points down in the world
    assert math.isclose(got["sim_camera_optical_frame"].transform.rotation.w, 0.5, abs_tol=1e-9)

    # the rollout's frames come with their camera_info, in the optical frame
    images, infos = [], []
    viewer.create_subscription(Image, "/vid2sid/sim/rollout/image_raw", images.append, STREAM_QOS)
    viewer.create_subscription(CameraInfo, "/vid2sid/sim/rollout/camera_info", infos.append, STREAM_QOS)
    client = viewer.create_client(Rollout, "/vid2sid/sim/rollout")
    assert client.wait_for_service(timeout_sec=20.0)
    res = ros.spin_future(client.call_async(Rollout.Request(render=True)), timeout=120.0)
    assert res.success, res.message
    # a rollout's frames come as one burst: the keep-last history (qos.images.depth, 120) keeps the last ones
    n = min(res.trajectory.num_steps, 120)
    assert ros.spin_until(lambda: len(images) >= n and len(infos) >= n, timeout=30.0), (len(images), len(infos), n)
    ros.spin_until(lambda: False, timeout=0.5)
    assert {m.header.frame_id for m in images} == {m.header.frame_id for m in infos} == {"sim_camera_optical_frame"}
    stamp = lambda m: (m.header.stamp.sec, m.header.stamp.nanosec)  # noqa: E731
    assert {stamp(m) for m in images} <= {stamp(m) for m in infos}  # each frame has its camera_info
    assert infos[0].width == images[0].width and infos[0].k[0] > 0


def test_every_camera_node_defaults_to_an_optical_frame():
    from vid2sid_ros.nodes import camera_node, sim_twin_node, stand_in_rig_node

    for mod in (camera_node, sim_twin_node, stand_in_rig_node):
        assert {p.name: p.default for p in mod.PARAMS}["frame_id"].endswith("_optical_frame"), mod.__name__


def test_without_tf2_msgs_the_transforms_go_on_the_fallback_topic_and_the_log_says_so(ros, monkeypatch):
    """Where tf2_msgs cannot be imported (a venv set up before it was vendored), the same
    transforms go on vid2sid/camera_transforms, and one log line says why not /tf_static."""
    import sys

    from geometry_msgs.msg import TransformStamped
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    from vid2sid_ros.core.camera import PinholeCamera
    from vid2sid_ros.nodes.common import CAMERA_TF_TOPIC, publish_camera_tf

    monkeypatch.setitem(sys.modules, "tf2_msgs", None)  # import tf2_msgs.msg -> ImportError
    monkeypatch.setitem(sys.modules, "tf2_msgs.msg", None)
    node = ros.node("tf_fallback")
    lines: list[str] = []

    class _Log:
        def info(self, text):
            lines.append(text)

    monkeypatch.setattr(node, "get_logger", lambda: _Log())
    cam = PinholeCamera(320, 240, 300.0, 300.0, 160.0, 120.0, position=(1.0, -2.0, 0.5), yaw=0.3)
    tf = publish_camera_tf(node, lambda: cam, "world", ("real_camera_optical_frame",))
    assert tf is not None and tf.publisher.topic_name == "/" + CAMERA_TF_TOPIC
    assert len(lines) == 1 and "not /tf_static: tf2_msgs cannot be imported" in lines[0], lines
    got = {}
    ros.node("fallback_viewer").create_subscription(
        TransformStamped, "/" + CAMERA_TF_TOPIC, lambda m: got.__setitem__(m.child_frame_id, m),
        QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    assert ros.spin_until(lambda: len(got) == 2, timeout=20.0), sorted(got)
    t = got["real_camera_link"].transform.translation
    assert (t.x, t.y, t.z) == (1.0, -2.0, 0.5)


POSE_RIG = REPO / "examples" / "rigs" / "spherical_pendulum" / "rig.yaml"  # camera x, y, z, roll, pitch, yaw nuisances


@pytest.mark.timeout(300)
def test_a_calibration_that_identifies_the_camera_pose_republishes_tf_static(ros, tmp_path):
    """camera.* nuisances free, the result applied: /tf_static is latched again at the identified
    pose, and a listener joining afterwards gets only that one (tf2 static semantics)."""
    import threading

    from rclpy.parameter import Parameter

    from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
    from vid2sid_ros.nodes.calibrator_node import CalibratorNode
    from vid2sid_ros.nodes.sim_twin_node import SimTwinNode
    from vid2sid_ros.rigs import load_rig
    from vid2sid_ros.srv import Propose

    twin = SimTwinNode(context=ros.context, parameter_overrides=[Parameter("rig_config", value=str(POSE_RIG)),
                                                                  Parameter("publish_frames", value=False)])
    cal = CalibratorNode(context=ros.context, parameter_overrides=[
        Parameter("rig_config", value=str(POSE_RIG)), Parameter("run_dir", value=str(tmp_path)),
        Parameter("rollout_budget", value=60), Parameter("final_identifiability", value=False)])
    for n in (twin, cal):
        ros.nodes.append(n)
        ros.executor.add_node(n)
    _early, before = _tf_static_listener(ros, "before")
    assert ros.spin_until(lambda: len(before) >= 1, timeout=20.0)
    t0 = {t.child_frame_id: t for t in before[-1].transforms}["real_camera_link"].transform.translation
    assert (t0.x, t0.y, t0.z) == pytest.approx((2.15, -1.25, 1.7), abs=1e-12)  # the rig config's pose

    # the real camera stands 6 cm further along world x than the config says
    rig = load_rig(str(POSE_RIG))
    truth = {**rig.parameters.nominal(), "camera_x": 2.21}
    real = make_sim2sim_trial(rig, truth, noise="none")
    cal.real["t1"], cal.excitations["t1"] = real.train[0], real.train_excitations[0]
    cal._trial_order.append("t1")
    box = {}
    worker = threading.Thread(target=lambda: box.setdefault("r", cal._propose(
        Propose.Request(names=["camera_x"], iterations=3, apply=True), Propose.Response())))
    worker.start()
    assert ros.spin_until(lambda: not worker.is_alive(), timeout=240.0)  # the twin's parameter service answers
    resp = box["r"]
    assert resp.accepted, resp.message
    identified = dict(zip(resp.names, resp.values))["camera_x"]
    assert identified == pytest.approx(2.21, abs=0.01), resp.message

    def latest_x(msgs):
        return {t.child_frame_id: t for t in msgs[-1].transforms}["real_camera_link"].transform.translation.x

    assert ros.spin_until(lambda: len(before) >= 2 and latest_x(before) == pytest.approx(identified, abs=1e-9),
                          timeout=30.0), [latest_x([m]) for m in before]
    frames = {t.child_frame_id for t in before[-1].transforms}
    assert frames == {"real_camera_link", "real_camera_optical_frame", "sim_camera_link", "sim_camera_optical_frame"}
    assert twin.static_transforms[0][2][0] == pytest.approx(identified, abs=1e-9)
    _late, after = _tf_static_listener(ros, "after")  # joins after the update: the new pose only
    assert ros.spin_until(lambda: len(after) >= 1, timeout=20.0)
    ros.spin_until(lambda: False, timeout=0.3)
    assert len(after) == 1 and latest_x(after) == pytest.approx(identified, abs=1e-9)
