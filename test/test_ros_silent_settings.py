"""Settings that do not apply to the loaded rig are said, not silently dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="rclpy comes with `make setup` (.venv)")

REPO = Path(__file__).resolve().parents[1]


def test_finger_hidden_values_with_a_user_rig_are_named_as_ignored(ros):
    """(was: with rig_config:= a user rig, finger.yaml's hidden.* values did not apply and nothing said so:
    the stand-in played the nominal parameters)"""
    from rclpy.parameter import Parameter

    from vid2sid_ros.nodes.stand_in_rig_node import StandInRigNode

    node = StandInRigNode(context=ros.context,
                          cli_args=["--ros-args", "--params-file", str(REPO / "config" / "finger.yaml")],
                          parameter_overrides=[Parameter("rig_config", value=str(REPO / "examples" / "rigs" /
                                                                                 "urdf_arm" / "rig.yaml"))])
    ros.nodes.append(node)
    assert node.ignored_hidden == ["hidden.actuator_gain", "hidden.joint_armature", "hidden.joint_damping",
                                   "hidden.joint_friction", "hidden.joint_stiffness"]
    assert set(node.hidden) == set(node._rig.parameters.names)  # the user rig's own, at their nominal values


def test_the_finger_rig_uses_every_hidden_value_of_its_params_file(ros):
    from vid2sid_ros.nodes.stand_in_rig_node import StandInRigNode

    node = StandInRigNode(context=ros.context,
                          cli_args=["--ros-args", "--params-file", str(REPO / "config" / "finger.yaml")])
    ros.nodes.append(node)
    assert node.ignored_hidden == [] and node.hidden["joint_stiffness"] == 0.42
