"""Calibrate the MuJoCo finger twin against the real finger (camera + rig driver).

    ros2 launch vid2sid_ros calibrate_finger.launch.py camera_source:=0
    ros2 launch vid2sid_ros calibrate_finger.launch.py stand_in:=true     # no hardware
    ros2 service call /vid2sid/excitation/start std_srvs/srv/Trigger
    ros2 service call /vid2sid/propose vid2sid_ros/srv/Propose "{apply: true, iterations: 1}"

Nodes, executables and params files (config/finger.yaml) come from the graphs "finger"
and "finger_stand_in" of vid2sid_ros.nodes.graph.GRAPHS, the table `vid2sid bringup`
runs in-process where ROS 2 launch is not installed.
"""

from vid2sid_ros.nodes.launch_support import generate_launch_description as _generate

GRAPH = "finger"
STAND_IN_GRAPH = "finger_stand_in"


def generate_launch_description():
    return _generate(GRAPH, stand_in_graph=STAND_IN_GRAPH)
