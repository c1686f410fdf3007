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
    with pytest.raises(RuntimeError, match=r"no command subscription of ghost_node on /vid2sid/excitation/command after 1 s"):
        ex.start_trial()
    assert not ex.running and not got and ex.refused
    ex2 = ExcitationNode(context=ros.context, parameter_overrides=[
        Parameter("wait_for", value=["listener"]), Parameter("wait_timeout", value=20.0)])
    ros.nodes.append(ex2)
    ros.executor.add_node(ex2)
    assert ex2.start_trial() == "trial_0"  # the listener is matched: the trial starts
    assert ros.spin_until(lambda: len(got) >= 3, timeout=10.0)
    assert got[0].step == 0  # from its first command
