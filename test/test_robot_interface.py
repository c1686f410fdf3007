"""excitation_node drives a robot through its own interface (issue 14): ros2_control topics, limits.

On one ROS graph: excitation_node publishing std_msgs/Float64MultiArray on
/forward_position_controller/commands, a stand-in forward command controller of ours
(test/helpers/forward_controller.py) in front of the stand-in robot (the finger twin at
hidden parameters, rendering the camera). The trial runs in lockstep exactly as with the
package's own ExcitationCommand route (same frames, none dropped); nothing is published
before the start; a profile outside the limits is refused before its first command and
no command outside the limits is ever published; on stop the robot is brought to zero at
the allowed rate.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy comes with `make setup` (.venv)")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from vid2sid_ros.io.image_msg import image_to_array  # noqa: E402
from vid2sid_ros.nodes.common import STREAM_QOS, ExcitationCommand  # noqa: E402

EXC = "{kind: sine, amplitude: 0.3, frequency: 1.5, duration: 1.0, rate: 30, offset: 0.5}"  # 0.5 +- 0.3


def _graph(ros, interface_params, *, forward: bool):
    from helpers.forward_controller import ForwardControllerStandIn
    from vid2sid_ros.nodes.excitation_node import make_node as make_exc
    from vid2sid_ros.nodes.stand_in_rig_node import make_node as make_rig

    rig = make_rig(context=ros.context, parameter_overrides=[Parameter("noise", value=False)])
    ros.executor.add_node(rig)
    ros.nodes.append(rig)
    exc = make_exc(context=ros.context, parameter_overrides=[Parameter("excitation_config", value=EXC),
                                                             *interface_params])
    ros.executor.add_node(exc)
    ros.nodes.append(exc)
    ctl = None
    if forward:
        ctl = ForwardControllerStandIn(joints=["flexor"], joint_to_actuator={"flexor": "flexor_motor"},
                                       period=exc.excitation.period, context=ros.context)
        ros.executor.add_node(ctl)
        ros.nodes.append(ctl)
    obs = ros.node("observer")
    got = {"images": [], "cmds": [], "robot": []}
    obs.create_subscription(Image, "/vid2sid/real/image_raw", lambda m: got["images"].append(m), STREAM_QOS)
    obs.create_subscription(ExcitationCommand, "/vid2sid/excitation/command", lambda m: got["cmds"].append(m), STREAM_QOS)
    obs.create_subscription(Float64MultiArray, "/forward_position_controller/commands",
                            lambda m: got["robot"].append(list(m.data)), STREAM_QOS)
    start = obs.create_client(Trigger, "/vid2sid/excitation/start")
    stop = obs.create_client(Trigger, "/vid2sid/excitation/stop")
    assert ros.spin_until(lambda: start.service_is_ready() and stop.service_is_ready(), timeout=20)
    ros.spin_until(lambda: False, timeout=0.5)  # let the topics match
    return exc, rig, ctl, got, start, stop


def _frames(images):
    return [image_to_array(m, "rgb8").copy() for m in images]


def _teardown(ros):
    for n in list(ros.nodes):
        ros.executor.remove_node(n)
        n.destroy_node()
    ros.nodes.clear()


def test_forward_command_controller_runs_the_trial_in_lockstep_like_today(ros):
    exc, rig, _, got, start, _ = _graph(ros, [], forward=False)   # today's route: ExcitationCommand
    T = exc.excitation.num_steps
    assert ros.spin_future(start.call_async(Trigger.Request()), timeout=10).success
    assert ros.spin_until(lambda: len(got["images"]) >= T and not exc.running, timeout=30)
    ros.spin_until(lambda: False, timeout=0.3)
    today = _frames(got["images"])
    _teardown(ros)

    fwd = [Parameter("command_interface", value="forward"), Parameter("command_joints", value=["flexor"]),
           Parameter("actuator_map", value=["flexor_motor=flexor"]),
           Parameter("limit_lower", value=[0.0]), Parameter("limit_upper", value=[1.0]),
           Parameter("max_rate", value=[5.0])]
    exc, rig, ctl, got, start, _ = _graph(ros, fwd, forward=True)
    ros.spin_until(lambda: False, timeout=0.5)
    assert got["robot"] == [] and got["images"] == []        # no command before the explicit start
    assert ros.spin_future(start.call_async(Trigger.Request()), timeout=10).success
    assert ros.spin_until(lambda: len(got["images"]) >= T and not exc.running, timeout=30)
    ros.spin_until(lambda: False, timeout=0.3)
    assert len(ctl.received) == T
    np.testing.assert_allclose(np.array(ctl.received)[:, 0], exc.excitation.values[:, 0])
    frames = _frames(got["images"])
    assert len(frames) == len(today) == T
    assert all(np.array_equal(a, b) for a, b in zip(frames, today))  # the same trial, frame by frame
    # one frame per command, in order, each captured after its command was due (receive-time stamps of the
    # forward controller: under load they lag the schedule, never lead it)
    due = np.array([c.header.stamp.sec + 1e-9 * c.header.stamp.nanosec for c in got["cmds"]]) + exc.excitation.period
    shot = np.array([m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec for m in got["images"]])
    assert len(due) == len(shot) == T and np.all(np.diff(shot) > 0) and np.all(shot >= due - 1e-3)
    _teardown(ros)


def test_commands_outside_the_limits_are_never_published(ros):
    fwd = [Parameter("command_interface", value="forward"), Parameter("command_joints", value=["flexor"]),
           Parameter("actuator_map", value=["flexor_motor=flexor"]),
           Parameter("limit_lower", value=[0.0]), Parameter("limit_upper", value=[0.7]),   # the sine reaches 0.8
           Parameter("max_rate", value=[5.0]), Parameter("on_stop", value="zero")]
    exc, rig, ctl, got, start, stop = _graph(ros, fwd, forward=True)
    res = ros.spin_future(start.call_async(Trigger.Request()), timeout=10)
    assert not res.success and "outside [0, 0.7] (limit_lower/limit_upper)" in res.message
    assert res.message.startswith("trial refused (nothing published): step ") and "flexor = 0.7" in res.message
    ros.spin_until(lambda: False, timeout=0.5)
    assert got["robot"] == [] and exc.robot_commands == []

    # a profile inside the amplitude limits but too fast for max_rate is refused as well
    exc.set_parameters([Parameter("excitation_config", value="{kind: step, amplitude: 0.6, t_step: 0.2, "
                                                          "duration: 1.0, rate: 30}")])
    res = ros.spin_future(start.call_async(Trigger.Request()), timeout=10)
    assert not res.success and "faster than max_rate 5" in res.message
    # an admissible profile runs; stopped early, the robot is ramped to zero at <= max_rate
    exc.set_parameters([Parameter("excitation_config", value="{kind: sine, amplitude: 0.2, frequency: 0.5, "
                                                          "offset: 0.4, duration: 3.0, rate: 30}")])
    assert ros.spin_future(start.call_async(Trigger.Request()), timeout=10).success
    ros.spin_until(lambda: len(got["robot"]) >= 20, timeout=10)
    assert ros.spin_future(stop.call_async(Trigger.Request()), timeout=10).success
    ros.spin_until(lambda: got["robot"] and got["robot"][-1] == [0.0] and len(got["robot"]) == len(exc.robot_commands),
                   timeout=10)
    sent = np.array(got["robot"])[:, 0]
    assert sent[-1] == 0.0 and 20 <= len(sent) < 90
    assert sent.min() >= 0.0 and sent.max() <= 0.7
    assert np.max(np.abs(np.diff(sent))) <= 5.0 * exc.excitation.period + 1e-9
    assert len(exc.refused) == 2  # the two refused profiles; no single command of the run was refused
    _teardown(ros)


def test_command_limits_unit():
    from vid2sid_ros.nodes.excitation_node import CommandLimits

    lim = CommandLimits(["a", "b"], [-1.0], [1.0, 0.5], [2.0], 3.0)
    v = np.array([[0.0, 0.0], [0.05, 0.06], [0.1, 0.6]])
    assert lim.violation(v, 0.1) == "step 2: b = 0.6 outside [-1, 0.5] (limit_lower/limit_upper)"
    assert lim.violation(v[:2], 0.1, previous=np.array([0.5, 0.0])).startswith("step 0: a changes at 5 per s, faster than max_rate 2")
    assert "longer than max_duration 3 s" in lim.violation(np.zeros((40, 2)), 0.1)
    ramp = lim.ramp(np.array([1.0, 0.0]), np.zeros(2), 0.1)
    assert len(ramp) == 5 and np.allclose(ramp[-1], 0.0)
    with pytest.raises(ValueError, match="3 values for 2 command joints"):
        CommandLimits(["a", "b"], [0, 0, 0], [1.0], [1.0], 1.0)
