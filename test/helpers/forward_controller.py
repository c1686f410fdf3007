"""A stand-in ros2_control ``forward_command_controller`` in front of the stand-in robot.

Subscribes ``std_msgs/Float64MultiArray`` on the controller's command topic (``data`` in
its ``joints`` order), like ``forward_position_controller`` would, and hands each command
to the stand-in robot's hardware input (``/vid2sid/real/command``) with the joint ->
actuator mapping by name, the receive time as the command's time and a step counter. A
forward controller knows no trials: the counter restarts after the trial-end notice.
"""

from __future__ import annotations

import time

from rclpy.node import Node
from std_msgs.msg import Float64MultiArray

from vid2sid_ros.nodes.common import STREAM_QOS, ExcitationCommand, stamp_from_s


class ForwardControllerStandIn(Node):
    """Float64MultiArray in, the stand-in robot's command out (see module docstring)."""

    def __init__(self, *, joints, joint_to_actuator, period: float, topic="/forward_position_controller/commands",
                 **kwargs) -> None:
        super().__init__("forward_controller_stand_in", **kwargs)
        self.joints = list(joints)
        self.actuators = [joint_to_actuator.get(j, j) for j in self.joints]
        self.period = float(period)
        self.received: list[list[float]] = []
        self._trial = 0
        self._step = 0
        self._out = self.create_publisher(ExcitationCommand, "/vid2sid/real/command", STREAM_QOS)
        self.create_subscription(Float64MultiArray, topic, self._on_command, STREAM_QOS)
        self.create_subscription(ExcitationCommand, "/vid2sid/excitation/trial_end", self._on_end, STREAM_QOS)

    def _on_command(self, msg: Float64MultiArray) -> None:
        data = list(msg.data)
        if len(data) != len(self.joints):
            self.get_logger().error(f"command of {len(data)} values for joints {self.joints}: ignored")
            return
        self.received.append(data)
        c = ExcitationCommand()
        c.header.stamp = stamp_from_s(time.time())
        c.trial_id, c.step, c.period = f"fwd_{self._trial}", self._step, self.period
        c.actuator_names = self.actuators
        c.values = [float(v) for v in data]
        self._step += 1
        self._out.publish(c)

    def _on_end(self, _msg) -> None:
        self._trial += 1
        self._step = 0
