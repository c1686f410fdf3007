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


def test_sim_twin_latches_the_user_rig_camera_pose_and_images_carry_optical_frames(ros):
    """(was: frame ids real_camera / sim_camera, nothing on /tf or /tf_static, no camera_info beside
    /vid2sid/sim/rollout/image_raw)"""
    from geometry_msgs.msg import TransformStamped
    from rclpy.parameter import Parameter
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import CameraInfo, Image

    from vid2sid_ros.core.camera import BODY_TO_OPTICAL, look_at_rotation
    from vid2sid_ros.core.yamlio import loads_yaml
    from vid2sid_ros.nodes.common import CAMERA_TF_TOPIC, STREAM_QOS
    from vid2sid_ros.nodes.sim_twin_node import SimTwinNode
    from vid2sid_ros.srv import Rollout

    twin = SimTwinNode(context=ros.context, parameter_overrides=[Parameter("rig_config", value=str(USER_RIG))])
    ros.nodes.append(twin)
    ros.executor.add_node(twin)
    viewer = ros.node("viewer")
    latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    got: dict[str, TransformStamped] = {}
    try:
        from tf2_msgs.msg import TFMessage
    except ImportError:  # PyPI wheels: no ros-tf2-msgs; the same transforms as TransformStamped messages
        viewer.create_subscription(TransformStamped, "/" + CAMERA_TF_TOPIC,
                                   lambda m: got.__setitem__(m.child_frame_id, m), latched)
    else:  # a ROS install: tf2's own /tf_static
        viewer.create_subscription(TFMessage, "/tf_static",
                                   lambda m: got.update({t.child_frame_id: t for t in m.transforms}),
                                   QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                                              durability=DurabilityPolicy.TRANSIENT_LOCAL))
    frames = ("sim_camera_link", "sim_camera_optical_frame", "real_camera_link", "real_camera_optical_frame")
    assert ros.spin_until(lambda: all(f in got for f in frames), timeout=20.0), sorted(got)
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
