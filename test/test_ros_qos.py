"""QoS that connects: a camera driver with sensor-data QoS (BEST_EFFORT) feeds the tracker."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy comes with `make setup` (.venv)")


def _finger_frames():
    """Rendered frames (T, H, W, 3) of the finger's first training excitation, and that excitation."""
    from vid2sid_ros.rigs import load_rig

    rig = load_rig("finger")
    exc = rig.excitations["train"][0]
    twin = rig.make_twin()
    res = twin.rollout(exc, render=True)
    return np.asarray(res.frames), exc


def _drive(ros, exc, frames, real_qos, *, trial_id="qos_0"):
    """Publish commands, real frames with ``real_qos`` and reliable sim frames, then the trial end."""
    from sensor_msgs.msg import Image

    from vid2sid_ros.io.image_msg import array_to_image
    from vid2sid_ros.nodes.common import STREAM_QOS, ExcitationCommand, excitation_to_commands, stamp_from_s

    pub_node = ros.node("camera_driver")
    real = pub_node.create_publisher(Image, "/vid2sid/real/image_raw", real_qos)
    sim = pub_node.create_publisher(Image, "/vid2sid/sim/image_raw", STREAM_QOS)
    cmd = pub_node.create_publisher(ExcitationCommand, "/vid2sid/excitation/command", STREAM_QOS)
    end = pub_node.create_publisher(ExcitationCommand, "/vid2sid/excitation/trial_end", STREAM_QOS)
    return pub_node, real, sim, cmd, end, array_to_image, Image, excitation_to_commands, stamp_from_s, ExcitationCommand


def test_best_effort_camera_driver_feeds_the_tracker(ros):
    """(was: RELIABLE depth-120 image subscriptions; a BEST_EFFORT publisher got 0 matches and the
    tracker never saw a frame)"""
    from rclpy.qos import ReliabilityPolicy, qos_profile_sensor_data

    from vid2sid_ros.nodes.tracker_node import TrackerNode

    frames, exc = _finger_frames()
    T = exc.num_steps
    tracker = TrackerNode(context=ros.context)
    ros.nodes.append(tracker)
    ros.executor.add_node(tracker)
    (pub_node, real, sim, cmd, end, array_to_image, Image, to_cmds, stamp_from_s,
     ExcitationCommand) = _drive(ros, exc, frames, qos_profile_sensor_data)
    subs = {s.subscription.topic_name: s for s in tracker._vid2sid_qos_subscriptions}
    real_sub = subs["/vid2sid/real/image_raw"]
    # the tracker sees the best-effort publisher, says so once and re-subscribes best_effort
    assert ros.spin_until(lambda: real_sub.adapted and real.get_subscription_count() >= 1
                          and sim.get_subscription_count() >= 1 and cmd.get_subscription_count() >= 1
                          and end.get_subscription_count() >= 1, timeout=20.0)
    assert real_sub.qos.reliability == ReliabilityPolicy.BEST_EFFORT
    assert "/vid2sid/real/image_raw" in real_sub.mismatch and "best_effort" in real_sub.mismatch \
        and "reliable" in real_sub.mismatch, real_sub.mismatch
    assert subs["/vid2sid/sim/image_raw"].qos.reliability == ReliabilityPolicy.RELIABLE  # untouched
    t0 = time.time()
    for c in to_cmds(exc, "qos_0", [t0 + k * exc.period for k in range(T)]):
        cmd.publish(c)
    ros.spin_until(lambda: False, timeout=0.3)
    for k in range(T):
        for pub in (real, sim):
            img = array_to_image(frames[k], "rgb8", Image)
            img.header.stamp = stamp_from_s(t0 + (k + 1) * exc.period)
            img.header.frame_id = "real_camera_optical_frame"
            pub.publish(img)
        ros.spin_until(lambda: False, timeout=0.02)  # a camera's pace, not a burst
    e = ExcitationCommand(trial_id="qos_0", step=T, period=float(exc.period))
    e.header.stamp = stamp_from_s(t0 + T * exc.period)
    end.publish(e)
    assert ros.spin_until(lambda: "qos_0" in tracker.results, timeout=30.0)
    tracked = tracker.results["qos_0"]["real"].valid.all(axis=1)
    assert tracked.sum() >= 0.9 * T, f"{tracked.sum()} of {T} real frames tracked"


def test_explicit_reliable_subscription_names_the_mismatch_once(ros):
    """qos.images.reliability:=reliable does not adapt: the mismatch is said once, topic and both profiles."""
    from rclpy.parameter import Parameter
    from rclpy.qos import ReliabilityPolicy, qos_profile_sensor_data
    from sensor_msgs.msg import Image

    from vid2sid_ros.nodes.tracker_node import TrackerNode

    tracker = TrackerNode(context=ros.context,
                          parameter_overrides=[Parameter("qos.images.reliability", value="reliable")])
    ros.nodes.append(tracker)
    ros.executor.add_node(tracker)
    pub_node = ros.node("camera_driver")
    pub_node.create_publisher(Image, "/vid2sid/real/image_raw", qos_profile_sensor_data)
    real_sub = {s.subscription.topic_name: s for s in tracker._vid2sid_qos_subscriptions}["/vid2sid/real/image_raw"]
    assert ros.spin_until(lambda: real_sub.mismatch is not None, timeout=20.0)
    ros.spin_until(lambda: False, timeout=1.0)
    assert not real_sub.adapted and real_sub.qos.reliability == ReliabilityPolicy.RELIABLE
    assert real_sub.mismatch.startswith("QoS mismatch on /vid2sid/real/image_raw: this subscription requests "
                                        "[reliable, volatile, keep_last 120], publisher(s) offer "
                                        "[/camera_driver: best_effort, volatile] (incompatible policy: reliability)"), real_sub.mismatch
    assert real_sub.mismatch_count == 1


def test_every_node_declares_its_qos_parameters():
    from vid2sid_ros.nodes import common

    for mod in ("tracker_node", "sim_twin_node", "camera_node", "stand_in_rig_node", "excitation_node",
                "calibrator_node", "recorder_node", "bag_replay_node"):
        m = __import__(f"vid2sid_ros.nodes.{mod}", fromlist=["PARAMS"])
        names = {p.name for p in m.PARAMS}
        kinds = {n.split(".")[1] for n in names if n.startswith("qos.")}
        assert kinds and kinds <= set(common.QOS_KINDS), mod
        assert all(f"qos.{k}.depth" in names and f"qos.{k}.reliability" in names for k in kinds), mod
