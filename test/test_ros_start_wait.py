"""Excitation and replay wait for their subscribers (bounded), and refuse naming the missing ones."""

from __future__ import annotations

import pytest

pytest.importorskip("rclpy", reason="rclpy comes with `make setup` (.venv)")


def test_a_trial_waits_for_its_subscribers_and_is_refused_naming_the_missing_one(ros):
    """(was: replay and excitation started as soon as their timer fired: the replay began 0.7 s before
    the twin was ready, 20 commands missing)"""
    from rclpy.parameter import Parameter

    from vid2sid_ros.nodes.common import STREAM_QOS, ExcitationCommand
    from vid2sid_ros.nodes.excitation_node import ExcitationNode

    ex = ExcitationNode(context=ros.context, parameter_overrides=[
        Parameter("wait_for", value=["listener", "ghost_node"]), Parameter("wait_timeout", value=1.0)])
    ros.nodes.append(ex)
    ros.executor.add_node(ex)
    got = []
    ros.node("listener").create_subscription(ExcitationCommand, "/vid2sid/excitation/command", got.append, STREAM_QOS)
    with pytest.raises(RuntimeError, match=r"no command subscription of ghost_node on /vid2sid/excitation/command or "
                                           r"/vid2sid/real/command after 1 s"):
        ex.start_trial()
    assert not ex.running and not got and ex.refused
    ex2 = ExcitationNode(context=ros.context, parameter_overrides=[
        Parameter("wait_for", value=["listener"]), Parameter("wait_timeout", value=20.0)])
    ros.nodes.append(ex2)
    ros.executor.add_node(ex2)
    assert ex2.start_trial() == "trial_0"  # the listener is matched: the trial starts
    assert ros.spin_until(lambda: len(got) >= 3, timeout=10.0)
    assert got[0].step == 0  # from its first command


def test_a_trial_waits_for_the_robot_that_subscribes_the_robot_command_topic(ros):
    """(was: wait_for looked at the command stream only; the stand-in rig, which subscribes the robot's
    command topic, was never waited for: under ros2 launch the tentacle stand-in, still building its
    PyElastica model, missed the first 51 of 75 commands and its trial had no tracked frame)"""
    from rclpy.parameter import Parameter

    from vid2sid_ros.nodes.common import STREAM_QOS, ExcitationCommand
    from vid2sid_ros.nodes.excitation_node import ExcitationNode
    from vid2sid_ros.nodes.graph import TOPICS

    ex = ExcitationNode(context=ros.context, parameter_overrides=[
        Parameter("wait_for", value=["robot"]), Parameter("wait_timeout", value=1.0)])
    ros.nodes.append(ex)
    ros.executor.add_node(ex)
    with pytest.raises(RuntimeError, match="no command subscription of robot"):
        ex.start_trial()
    got = []
    ros.node("robot").create_subscription(ExcitationCommand, TOPICS["rig_command"], got.append, STREAM_QOS)
    ex.set_parameters([Parameter("wait_timeout", value=20.0)])
    assert ex.start_trial() == "trial_0"  # the robot's subscription of vid2sid/real/command counts
    assert ros.spin_until(lambda: len(got) >= 3, timeout=10.0) and got[0].step == 0


def test_the_stand_in_graphs_wait_for_the_stand_in_rig():
    from vid2sid_ros.core.yamlio import loads_yaml
    from vid2sid_ros.nodes.graph import GRAPHS, find_config_dir

    for graph in ("finger_stand_in", "tentacle_stand_in"):
        (spec,) = [s for s in GRAPHS[graph] if s.name == "excitation_node"]
        wait_for = None
        for f in spec.params_files:  # later files override earlier ones
            doc = loads_yaml((find_config_dir() / f).read_text(), source=f)
            wait_for = doc.get("/**/excitation_node", {}).get("ros__parameters", {}).get("wait_for", wait_for)
        assert "stand_in_rig_node" in wait_for, (graph, spec.params_files, wait_for)
    for graph in ("finger", "tentacle"):  # a camera graph has no stand-in to wait for
        (spec,) = [s for s in GRAPHS[graph] if s.name == "excitation_node"]
        assert "stand_in.yaml" not in spec.params_files
