"""Node parameters (typed, documented, validated) and the twin's services, over rclpy + DDS."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy comes with `make setup` (.venv)")

from rcl_interfaces.srv import DescribeParameters  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.parameter_client import AsyncParameterClient  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from vid2sid_ros._interfaces import require_interfaces  # noqa: E402

require_interfaces()

from vid2sid_ros.nodes.common import STREAM_QOS, ExcitationCommand, excitation_to_commands  # noqa: E402
from vid2sid_ros.nodes.excitation_node import ExcitationNode  # noqa: E402
from vid2sid_ros.nodes.sim_twin_node import SimTwinNode  # noqa: E402
from vid2sid_ros.srv import Rollout  # noqa: E402


def _add(ros, node):
    ros.nodes.append(node)
    ros.executor.add_node(node)
    return node


def test_twin_parameters_are_declared_validated_and_applied(ros):
    twin = _add(ros, SimTwinNode(context=ros.context, parameter_overrides=[
        Parameter("physics.joint_stiffness", value=0.35), Parameter("publish_frames", value=False)]))
    client = ros.node("param_client")
    # descriptor: description with meaning and unit, range from the spec bounds
    desc_cli = client.create_client(DescribeParameters, "/sim_twin_node/describe_parameters")
    assert ros.spin_until(desc_cli.service_is_ready, timeout=10.0)
    d = ros.spin_future(desc_cli.call_async(DescribeParameters.Request(names=["physics.joint_stiffness", "rig"])))
    stiff, rig = d.descriptors
    assert "[N*m/rad]" in stiff.description and "stiffness" in stiff.description
    spec = twin.parameters["joint_stiffness"]
    assert (stiff.floating_point_range[0].from_value, stiff.floating_point_range[0].to_value) == (spec.lower, spec.upper)
    assert rig.read_only
    assert twin.lockstep.applied["joint_stiffness"] == 0.35  # from the override, written into the twin

    pc = AsyncParameterClient(client, "sim_twin_node")
    assert ros.spin_until(pc.services_are_ready, timeout=10.0)
    res = ros.spin_future(pc.set_parameters([Parameter("physics.joint_stiffness", value=5.0)]))
    assert not res.results[0].successful  # outside the spec bounds
    res = ros.spin_future(pc.set_parameters([Parameter("rig", value="tentacle")]))
    assert not res.results[0].successful and "read-only" in res.results[0].reason
    res = ros.spin_future(pc.set_parameters([Parameter("physics.joint_damping", value=0.008)]))
    assert res.results[0].successful
    assert twin.lockstep.applied["joint_damping"] == 0.008  # idle twin: applied at once
    assert twin.lockstep.applied["joint_stiffness"] == 0.35

    # headless rollout with per-request overrides (not persisted), explicit commands
    from vid2sid_ros.sim.registry import make_rig

    exc = make_rig("finger").excitations["train"][0]
    roll = client.create_client(Rollout, "/vid2sid/sim/rollout")
    assert ros.spin_until(roll.service_is_ready, timeout=10.0)
    req = Rollout.Request(names=["actuator_gain"], values=[15.0], commands=excitation_to_commands(exc, "r0"))
    out = ros.spin_future(roll.call_async(req), timeout=30.0)
    assert out.success and out.trajectory.num_steps == exc.num_steps
    assert len(out.trajectory.x) == exc.num_steps * 3 and all(out.trajectory.valid)
    ref_twin = make_rig("finger").make_twin()
    ref_twin.set_parameters({"joint_stiffness": 0.35, "joint_damping": 0.008, "actuator_gain": 15.0})
    ref = ref_twin.rollout(exc).trajectory
    assert list(out.trajectory.x) == pytest.approx(ref.keypoints[..., 0].ravel().tolist(), abs=1e-9)
    assert twin.current_values()["actuator_gain"] == 10.0  # the override was not persisted
    bad = ros.spin_future(roll.call_async(Rollout.Request(names=["bogus"], values=[1.0])), timeout=10.0)
    assert not bad.success and "unknown parameter(s) ['bogus']" in bad.message
    bad = ros.spin_future(roll.call_async(Rollout.Request(names=["actuator_gain"], values=[99.0])), timeout=10.0)
    assert not bad.success and "outside the bounds" in bad.message


def test_excitation_node_runs_trials_on_a_timer(ros):
    ex = _add(ros, ExcitationNode(context=ros.context, parameter_overrides=[
        Parameter("excitation_config", value="{kind: sine, amplitude: 0.3, frequency: 2.0, duration: 0.4, rate: 50.0}"),
        Parameter("rig", value="finger")]))
    listener = ros.node("listener")
    got, ends, rig_cmds, arrivals = [], [], [], []

    def on_cmd(m):
        got.append(m)
        arrivals.append(time.monotonic())

    listener.create_subscription(ExcitationCommand, "/vid2sid/excitation/command", on_cmd, STREAM_QOS)
    listener.create_subscription(ExcitationCommand, "/vid2sid/excitation/trial_end", ends.append, STREAM_QOS)
    listener.create_subscription(ExcitationCommand, "/vid2sid/real/command", rig_cmds.append, STREAM_QOS)
    start = listener.create_client(Trigger, "/vid2sid/excitation/start")
    assert ros.spin_until(start.service_is_ready, timeout=10.0)
    assert ros.spin_until(lambda: ex._pub.get_subscription_count() > 0, timeout=10.0)
    r = ros.spin_future(start.call_async(Trigger.Request()))
    assert r.success and r.message == "trial_0"
    again = ros.spin_future(start.call_async(Trigger.Request()))
    assert not again.success and "still running" in again.message
    assert ros.spin_until(lambda: len(ends) == 1, timeout=10.0)
    assert [c.step for c in got] == list(range(20)) and ends[0].step == 20 and not ends[0].values
    assert [c.values[0] for c in rig_cmds] == [c.values[0] for c in got]  # the same stream to the rig
    assert got[5].period == pytest.approx(0.02) and got[5].actuator_names == ["flexor_motor"]
    stamps = [c.header.stamp.sec + 1e-9 * c.header.stamp.nanosec for c in got]
    np.testing.assert_allclose(np.diff(stamps), 0.02, atol=1e-6)  # stamped on the trial's schedule
    assert arrivals[-1] - arrivals[0] > 0.2  # and paced by the timer, not published at once


def test_rig_config_parameter_builds_the_rig_from_a_file(ros, tmp_path):
    """A node's ``rig_config`` (a rig config file) wins over ``rig``: here a finger whose spec is overridden."""
    import yaml

    from vid2sid_ros.sim.registry import make_rig

    d = make_rig("finger").parameters.to_dict()
    d["parameters"][0]["upper"] = 0.9  # joint_stiffness: wider range, visible in the node's descriptor
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(d, sort_keys=False))
    (tmp_path / "my_finger.yaml").write_text("rig: finger\nparameters: spec.yaml\n")
    twin = _add(ros, SimTwinNode(context=ros.context, parameter_overrides=[
        Parameter("rig", value="tentacle"), Parameter("rig_config", value=str(tmp_path / "my_finger.yaml")),
        Parameter("publish_frames", value=False)]))
    assert twin.parameters["joint_stiffness"].upper == 0.9 and "joint_stiffness" in twin.parameters
